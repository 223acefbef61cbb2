import { randomBytes } from 'node:crypto';
import { deriveKey, keyedReference } from '../../../src/keys/derived-keys';

describe('derived keys', () => {
  const master = randomBytes(32);

  it('derives the same key for the same purpose and a different one per purpose, never the master key', () => {
    const fingerprint = deriveKey(master, 'credential-fingerprint');
    expect(deriveKey(master, 'credential-fingerprint').equals(fingerprint)).toBe(true);
    expect(deriveKey(master, 'log-reference').equals(fingerprint)).toBe(false);
    expect(fingerprint.equals(master)).toBe(false);
    expect(fingerprint).toHaveLength(32);
  });

  it('gives a random key per call without a master key', () => {
    expect(deriveKey(undefined, 'log-reference').equals(deriveKey(undefined, 'log-reference'))).toBe(false);
  });

  it('makes a stable reference that depends on the key and does not contain the value', () => {
    const key = deriveKey(master, 'log-reference');
    const reference = keyedReference(key, '20-12345678-9', 16);
    expect(keyedReference(key, '20-12345678-9', 16)).toBe(reference);
    expect(keyedReference(deriveKey(randomBytes(32), 'log-reference'), '20-12345678-9', 16)).not.toBe(
      reference,
    );
    expect(reference).toMatch(/^[0-9a-f]{16}$/);
    expect(reference).not.toContain('12345678');
  });
});
