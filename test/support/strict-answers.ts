// `answer: strict` as a caller sees it: a 200 JSON answer through the filter compiled from one schema (the adversarial
// tests of test/unit/catalogue/answer-filter-*.test.ts).
import { compileAnswerFilter } from '../../src/catalogue/internal/answer-filter';

/** A card as an operation documents it: the provider may add more (a PAN) that must never pass. */
export const Card = {
  type: 'object',
  properties: { id: { type: 'string' }, last4: { type: 'string' } },
};

/** What the caller reads of `value` answered 200 under `schema`. */
export function filtered(schema: unknown, value: unknown): unknown {
  return JSON.parse(filteredBytes(schema, JSON.stringify(value)));
}

/** The bytes the caller gets for a raw body (for bodies JSON.stringify cannot write: duplicate keys, a BOM). */
export function filteredBytes(
  schema: unknown,
  body: string,
  status = 200,
  contentType = 'application/json',
): string {
  const filter = compileAnswerFilter(new Map([['200', schema]]));
  return filter({ status, headers: { 'content-type': contentType }, body: Buffer.from(body) }).body.toString(
    'utf8',
  );
}
