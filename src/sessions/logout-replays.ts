// Back-channel logout tokens are used once: each jti is remembered fleet-wide for as long as its token could verify.
import { sessionKeys } from '../keys/redis-keys';
import type { TokenStore } from '../tokens';
import { LOGOUT_TOKEN_CLOCK_TOLERANCE_SECONDS, LOGOUT_TOKEN_MAX_AGE_SECONDS } from './relying-party';

/** Past the token's age limit and the tolerated clock difference (both ways), plus a replica's own skew. */
const REMEMBER_MS = (LOGOUT_TOKEN_MAX_AGE_SECONDS + 2 * LOGOUT_TOKEN_CLOCK_TOLERANCE_SECONDS + 60) * 1000;

export interface LogoutReplays {
  /** True the first time this issuer's jti is seen (atomic across the fleet: SET NX PX); false for a replay. */
  firstUse(issuer: string, jti: string): Promise<boolean>;
  /** Forgets a jti whose logout failed, so the provider's retry of the same token is not taken for a replay. */
  forget(issuer: string, jti: string): Promise<void>;
}

export function createLogoutReplays(
  store: Pick<TokenStore, 'acquireLock' | 'delete'>,
  keyPrefix: string,
): LogoutReplays {
  const keyOf = sessionKeys(keyPrefix).usedLogoutToken;
  return {
    firstUse: (issuer, jti) => store.acquireLock(keyOf(issuer, jti), 'used', REMEMBER_MS),
    forget: (issuer, jti) => store.delete(keyOf(issuer, jti)),
  };
}
