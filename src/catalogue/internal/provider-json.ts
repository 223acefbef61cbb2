// A provider's JSON answer as the strict filter reads it: parsed so that what is written back keeps the provider's
// numbers as they were written (a 64-bit id), a leading byte-order mark dropped; and the objects of that parse.

/** JSON.rawJSON / isRawJSON (V8 11.4, Node 21+; the project runs Node 24): a number's text written back as sent. */
const rawJson = JSON as unknown as {
  rawJSON(text: string): unknown;
  isRawJSON(value: unknown): boolean;
};
if (typeof rawJson.rawJSON !== 'function' || typeof rawJson.isRawJSON !== 'function')
  throw new Error(`answer: strict needs JSON.rawJSON (Node 21 or later; this is ${process.version})`);

/** An object of the parse (not an array, not a number kept as its text). */
export function isJsonRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !rawJson.isRawJSON(value);
}

/** A number whose text a double would change (a 64-bit id, `1.0`, `1e3`) keeps its text. */
function keepNumberText(_key: string, value: unknown, context?: { source?: string }): unknown {
  return typeof value === 'number' && context?.source !== undefined && String(value) !== context.source
    ? rawJson.rawJSON(context.source)
    : value;
}

const BOM = '\uFEFF';
/**
 * Text that may hold a number a double would write back differently: a number value (after `:`, `[`, `,` or at the
 * start) with 16 or more digits (a 64-bit id, a long decimal), an exponent, a trailing zero after the point (`1.50`),
 * `-0`, or 6 zeros after `0.` (`String` writes those in exponent form). Only then is the answer parsed with
 * keepNumberText, which is slower (bench/README.md, Figures behind code choices). Digits inside strings (a card
 * number, a CBU) do not count; a string that happens to look like one costs the slower parse, nothing more.
 */
const RISKY_NUMBER =
  /(?:^|[:[,])\s*(?:-?(?:\d\.?){16}|-?[\d.]*\d[eE]|-?\d*\.\d*0(?!\d)|-0(?![\d.])|-?0\.0{6})/;

/** The JSON of a provider's answer body; throws (SyntaxError, RangeError) when it is not JSON or nests too deep. */
export function parseProviderJson(body: Buffer): unknown {
  let text = body.toString('utf8');
  if (text.startsWith(BOM)) text = text.slice(1); // RFC 8259 §8.1: a reader may ignore it, so may a caller
  return JSON.parse(text, RISKY_NUMBER.test(text) ? (keepNumberText as never) : undefined);
}
