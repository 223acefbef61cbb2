// The one hashing helper: SHA-256 of UTF-8 text as lower-case hex (API key hashes, Redis key names).
import { hash } from 'node:crypto';

/** The one-shot hash: cheaper than a Hash object per call (bench/README.md). */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex');
}
