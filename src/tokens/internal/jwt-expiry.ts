// Reads a token's expiry from its JWT `exp` claim, decoded without verification (the gateway has no key).
import { decodeJwt } from 'jose';

/** The provider's documented lifetimes (5 min, 24 h), used when a token carries no readable `exp`. */
export const ACCESS_FALLBACK_SECONDS = 300;
export const REFRESH_FALLBACK_SECONDS = 86_400;

/** Epoch milliseconds at which `token` expires: its `exp` claim, or `now + fallbackSeconds` when unreadable. */
export function tokenExpiresAt(token: string, fallbackSeconds: number, now: number): number {
  try {
    const { exp } = decodeJwt(token);
    if (typeof exp === 'number' && Number.isFinite(exp) && exp > 0) return exp * 1000;
  } catch {
    // Not a JWT we can decode: the documented lifetime is the best guess.
  }
  return now + fallbackSeconds * 1000;
}
