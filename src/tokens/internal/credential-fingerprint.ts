// The credential fingerprint stored beside shared records: tells credential versions apart without revealing them.
import { scryptSync } from 'node:crypto';
import { keyedReference } from '../../keys/derived-keys';

/** Hex characters kept: enough to tell versions apart, too few to identify a password. */
const FINGERPRINT_CHARS = 16;
/** scrypt cost of the keyless fallback: ~16 MiB and tens of milliseconds, once per credential change. */
const SCRYPT = { N: 2 ** 14, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const;

/**
 * With `key` (derived from TOKEN_ENCRYPTION_KEY for this purpose), an HMAC: whoever reads Redis cannot test password
 * guesses offline. Without a key, a slow hash salted by a fleet-wide constant and the username: every replica
 * computes the same value (the fleet must agree), and the operator has accepted plaintext tokens in Redis anyway,
 * which are worth more than a costly guess at the password.
 */
export function credentialFingerprint(username: string, password: string, key?: Buffer): string {
  const value = `${username}\n${password}`;
  if (key) return keyedReference(key, value, FINGERPRINT_CHARS);
  const salt = `payments-bff-gateway/credential-fingerprint\n${username}`;
  return scryptSync(value, salt, FINGERPRINT_CHARS / 2, SCRYPT).toString('hex');
}
