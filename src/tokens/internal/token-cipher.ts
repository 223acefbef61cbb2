// Seals the cached token pair with AES-256-GCM (TOKEN_ENCRYPTION_KEY) so Redis never holds a readable token.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** Format marker of sealed values; a new algorithm or layout gets a new version. */
const V1 = 'v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface TokenCipher {
  /** True when a key is configured and values are encrypted. */
  readonly encrypts: boolean;
  /** `plaintext` as stored: `v1:<base64(iv | ciphertext | tag)>` with a key, unchanged without. */
  seal(plaintext: string, context: string): string;
  /**
   * The plaintext of a stored value, or undefined when it cannot be trusted: tampered, sealed with another key
   * or for another context, unsealed while a key is configured, or sealed while none is.
   */
  open(stored: string, context: string): string | undefined;
}

/**
 * `context` (the store key) is bound as additional authenticated data, so a sealed value copied under another
 * key does not open. Each seal draws a fresh random 12-byte IV, as GCM requires.
 */
export function createTokenCipher(key?: Buffer): TokenCipher {
  if (key && key.length !== 32) throw new Error('the token encryption key must be 32 bytes');
  if (!key) {
    return {
      encrypts: false,
      seal: (plaintext) => plaintext,
      open: (stored) => (stored.startsWith(V1) ? undefined : stored),
    };
  }
  return {
    encrypts: true,
    seal(plaintext, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return V1 + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64');
    },
    open(stored, context) {
      if (!stored.startsWith(V1)) return undefined;
      const raw = Buffer.from(stored.slice(V1.length), 'base64');
      if (raw.length < IV_BYTES + TAG_BYTES) return undefined;
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
        decipher.setAAD(Buffer.from(context, 'utf8'));
        decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
        const body = raw.subarray(IV_BYTES, raw.length - TAG_BYTES);
        return Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8');
      } catch {
        return undefined;
      }
    },
  };
}
