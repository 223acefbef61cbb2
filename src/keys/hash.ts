// The one hashing helper: SHA-256 of UTF-8 text as lower-case hex (API key hashes, Redis key names).
import { hash } from 'node:crypto';

/** From the one-shot hash: a third of the cost of a Hash object. */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex');
}
