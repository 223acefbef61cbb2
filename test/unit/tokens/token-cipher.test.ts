import { randomBytes } from 'node:crypto';
import { createTokenCipher } from '../../../src/tokens/internal/token-cipher';

const PAIR = JSON.stringify({ access: 'eyJhbGciOi.access', refresh: 'eyJhbGciOi.refresh' });

describe('token cipher (AES-256-GCM)', () => {
  const key = randomBytes(32);
  const cipher = createTokenCipher(key);

  it('seals into a versioned value that reveals neither tokens nor field names, and opens it back', () => {
    const sealed = cipher.seal(PAIR, 'bff:{token:abc}:pair');
    expect(sealed.startsWith('v1:')).toBe(true);
    // Neither the plaintext's own encoding nor its words (three random base64 characters may spell "eyJ" by chance).
    expect(sealed).not.toContain(Buffer.from(PAIR).toString('base64').slice(0, 12));
    expect(sealed).not.toMatch(/eyJhbGciOi|access|refresh/);
    expect(Buffer.from(sealed.slice(3), 'base64').toString('latin1')).not.toMatch(
      /eyJhbGciOi|access|refresh/,
    );
    expect(cipher.open(sealed, 'bff:{token:abc}:pair')).toBe(PAIR);
  });

  it('uses a fresh IV every time', () => {
    expect(cipher.seal(PAIR, 'k')).not.toBe(cipher.seal(PAIR, 'k'));
  });

  it('refuses a tampered value, another key, another context, and a plaintext value', () => {
    const sealed = cipher.seal(PAIR, 'k');
    const bytes = Buffer.from(sealed.slice(3), 'base64');
    bytes[20] ^= 1;
    expect(cipher.open(`v1:${bytes.toString('base64')}`, 'k')).toBeUndefined();
    expect(createTokenCipher(randomBytes(32)).open(sealed, 'k')).toBeUndefined();
    expect(cipher.open(sealed, 'other-key')).toBeUndefined();
    expect(cipher.open(PAIR, 'k')).toBeUndefined();
    expect(cipher.open('v1:AAAA', 'k')).toBeUndefined();
  });

  it('without a key stores plaintext and refuses sealed values', () => {
    const plain = createTokenCipher();
    expect(plain.encrypts).toBe(false);
    expect(plain.open(plain.seal(PAIR, 'k'), 'k')).toBe(PAIR);
    expect(plain.open(cipher.seal(PAIR, 'k'), 'k')).toBeUndefined();
  });

  it('rejects a key that is not 32 bytes', () => {
    expect(() => createTokenCipher(randomBytes(16))).toThrow('32 bytes');
  });
});
