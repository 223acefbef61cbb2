// The one hashing helper: SHA-256 of UTF-8 text (API key hashes, Redis key names, session handles).
import { createHmac, hash } from 'node:crypto';

/** The one-shot hash: cheaper than a Hash object per call (bench/README.md). */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex');
}

/** The same hash as base64url: browser-session handles and login bindings (shorter keys). */
export function sha256Base64Url(value: string): string {
  return hash('sha256', value, 'base64url');
}

/** HMAC-SHA256 as hex: the quota webhook's signature (the receiver recomputes it with the shared key). */
export function hmacSha256Hex(key: string, value: string): string {
  return createHmac('sha256', key).update(value).digest('hex');
}
