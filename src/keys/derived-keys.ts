// Keys for separate purposes (credential fingerprints, log references) derived from TOKEN_ENCRYPTION_KEY with HKDF.
import { createHmac, hkdfSync, randomBytes } from 'node:crypto';

/** Every purpose that derives a key; a new use gets a new name, so no two uses ever share a key. */
export type KeyPurpose = 'credential-fingerprint' | 'log-reference' | 'session-user';

/**
 * A 32-byte key for `purpose`, derived from the gateway's encryption key (HKDF-SHA256, the purpose as info), so
 * the encryption key itself never serves as an HMAC key. Without an encryption key (local mode, tests) the key is
 * random per process: references stay unlinkable to the value, and stable only within this process.
 */
export function deriveKey(masterKey: Buffer | undefined, purpose: KeyPurpose): Buffer {
  if (!masterKey) return randomBytes(32);
  return Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), `payments-bff-gateway/${purpose}`, 32));
}

/** HMAC-SHA256 of `value` under `key`, hex: the same value gives the same reference, which does not reveal it. */
export function keyedReference(key: Buffer, value: string, hexChars = 64): string {
  return createHmac('sha256', key).update(value, 'utf8').digest('hex').slice(0, hexChars);
}
