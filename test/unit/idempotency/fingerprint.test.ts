import { canonicalJson, requestFingerprint } from '../../../src/idempotency/internal/fingerprint';

describe('request fingerprint', () => {
  test('canonical JSON sorts object keys at every depth and drops whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { y: 1, x: 2 }], c: 'é' } })).toBe(
      '{"a":{"c":"é","d":[2,{"x":2,"y":1}]},"b":1}',
    );
  });

  test('the same body in another key order or spacing has the same fingerprint', () => {
    const one = JSON.parse('{"country":"ARG","document":{"id":"1","type":"DNI"}}');
    const two = JSON.parse('{ "document": { "type": "DNI", "id": "1" }, "country": "ARG" }');
    expect(requestFingerprint('POST', '/p', one)).toBe(requestFingerprint('POST', '/p', two));
  });

  test('another value, array order, method or path is another request', () => {
    const base = requestFingerprint('POST', '/p', { a: [1, 2] });
    expect(requestFingerprint('POST', '/p', { a: [2, 1] })).not.toBe(base);
    expect(requestFingerprint('POST', '/p', { a: [1, 2], b: null })).not.toBe(base);
    expect(requestFingerprint('PUT', '/p', { a: [1, 2] })).not.toBe(base);
    expect(requestFingerprint('POST', '/q', { a: [1, 2] })).not.toBe(base);
  });

  test('the fingerprint is a hash: nothing of the body appears in it', () => {
    const fingerprint = requestFingerprint('POST', '/p', { document: { id: '20172543597' } });
    expect(fingerprint).not.toContain('20172543597');
    expect(fingerprint).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});
