// The one hashing helper: SHA-256 of UTF-8 text (API key hashes, Redis key names, session handles).
import { hash } from 'node:crypto';

/** The one-shot hash: cheaper than a Hash object per call (bench/README.md). */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex');
}

/** The same hash as base64url: browser-session handles and login bindings (shorter keys). */
export function sha256Base64Url(value: string): string {
  return hash('sha256', value, 'base64url');
}
