// The log reference of a document id: a keyed HMAC, stable for one key, unlinkable without it.
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { deriveKey, keyedReference } from '../../../src/keys/derived-keys';
import { createDocumentReference } from '../../../src/observability/document-reference';

const MASTER = randomBytes(32);

describe('document log reference', () => {
  it('is HMAC-SHA256 under the derived log-reference key (same value as keyedReference), 16 hex characters', () => {
    const reference = createDocumentReference(MASTER);
    const key = deriveKey(MASTER, 'log-reference');
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 80 }), (id) => {
        expect(reference(id)).toBe(keyedReference(key, id, 16));
      }),
      { numRuns: 500 },
    );
    expect(reference('20-17254359-7')).toMatch(/^[0-9a-f]{16}$/);
  });

  it('gives the same reference on every replica with the same key, and a different one under another key', () => {
    const id = '20-17254359-7';
    expect(createDocumentReference(MASTER)(id)).toBe(createDocumentReference(MASTER)(id));
    expect(createDocumentReference(randomBytes(32))(id)).not.toBe(createDocumentReference(MASTER)(id));
    expect(createDocumentReference(MASTER)('20-17254359-8')).not.toBe(createDocumentReference(MASTER)(id));
  });

  it('without an encryption key, is stable within the process only', () => {
    const local = createDocumentReference(undefined);
    expect(local('12345678')).toBe(local('12345678'));
    expect(createDocumentReference(undefined)('12345678')).not.toBe(local('12345678'));
  });
});
