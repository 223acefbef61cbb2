// What makes two requests "the same request" for one Idempotency-Key: method, path and the body in canonical JSON.
import { sha256Base64Url } from '../../keys/hash';

/**
 * JSON with object keys sorted at every depth and no whitespace: `{"b":1,"a":2}` and `{ "a": 2, "b": 1 }` are one
 * body. Arrays keep their order (it means something); `undefined` members are left out as JSON.stringify does.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  const record = value as Record<string, unknown>;
  const members = Object.keys(record)
    .sort()
    .filter((key) => record[key] !== undefined)
    .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`);
  return `{${members.join(',')}}`;
}

/** The request's fingerprint, kept with its claim: only a hash, never the body (it may hold a document id). */
export function requestFingerprint(method: string, path: string, body: unknown): string {
  return sha256Base64Url(`${method}\n${path}\n${body === undefined ? '' : canonicalJson(body)}`);
}
