import {
  ACCESS_FALLBACK_SECONDS,
  REFRESH_FALLBACK_SECONDS,
  tokenExpiresAt,
} from '../../../src/tokens/internal/jwt-expiry';
import { fakeJwt } from './token-fakes';

const NOW = 1_700_000_000_000;

describe('token expiry from the JWT exp claim', () => {
  it('reads exp (seconds) as epoch milliseconds, without verifying the signature', () => {
    expect(tokenExpiresAt(fakeJwt({ exp: 1_700_000_300 }), ACCESS_FALLBACK_SECONDS, NOW)).toBe(
      1_700_000_300_000,
    );
  });

  it('falls back to the documented lifetimes when exp is absent', () => {
    expect(tokenExpiresAt(fakeJwt({ iat: 1 }), ACCESS_FALLBACK_SECONDS, NOW)).toBe(NOW + 300_000);
    expect(tokenExpiresAt(fakeJwt({ iat: 1 }), REFRESH_FALLBACK_SECONDS, NOW)).toBe(NOW + 86_400_000);
  });

  it.each(['not-a-jwt', '', 'a.b.c', fakeJwt({ exp: 'soon' }), fakeJwt({ exp: -5 })])(
    'falls back when the token is unreadable (%s)',
    (token) => {
      expect(tokenExpiresAt(token, ACCESS_FALLBACK_SECONDS, NOW)).toBe(NOW + 300_000);
    },
  );
});
