// simplejwt-style HS256 token pairs, with the provider's levers: revocation, key rotation, refresh blacklisting.
import { randomBytes, randomUUID } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';

export type TokenType = 'access' | 'refresh';

export interface TokenClaims {
  token_type: TokenType;
  exp: number;
  iat: number;
  jti: string;
  user_id: number;
}

export interface TokenPair {
  access: string;
  refresh: string;
}

export interface TokenIssuerOptions {
  accessTtlSeconds: number;
  refreshTtlSeconds: number;
  /** Milliseconds since the epoch; injectable so expiry can be tested without waiting. */
  now?: () => number;
}

export interface TokenIssuer {
  issuePair(userId: number): Promise<TokenPair>;
  issueAccess(userId: number): Promise<string>;
  issueRefresh(userId: number): Promise<string>;
  /** The token's claims when it is well signed, unexpired, still outstanding and of the expected type; else null. */
  verify(token: string, expected: TokenType): Promise<TokenClaims | null>;
  /** Retires one token for good (simplejwt BLACKLIST_AFTER_ROTATION). */
  blacklist(jti: string): void;
  /** Invalidates every token issued so far; tokens issued afterwards work. */
  revokeAll(): void;
  /** Signs with a fresh secret from now on; tokens signed with the old one no longer verify. */
  rotateSigningKey(): void;
}

/** Outstanding tokens are pruned of expired entries once the registry grows past this size. */
const PRUNE_THRESHOLD = 10_000;

/**
 * A token is valid only while its jti is in the outstanding registry: that makes revocation and blacklisting
 * exact (no "issued in the same second" ambiguity) and keeps memory bounded by the number of live tokens.
 */
export function createTokenIssuer(options: TokenIssuerOptions): TokenIssuer {
  const now = options.now ?? Date.now;
  let key = newKey();
  const outstanding = new Map<string, number>();

  async function sign(type: TokenType, userId: number, ttlSeconds: number): Promise<string> {
    const iat = Math.floor(now() / 1000);
    const exp = iat + ttlSeconds;
    // simplejwt's jti is a uuid4 in hex.
    const jti = randomUUID().replaceAll('-', '');
    if (outstanding.size >= PRUNE_THRESHOLD) prune(iat);
    outstanding.set(jti, exp);
    return new SignJWT({ token_type: type, user_id: userId })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .setJti(jti)
      .sign(key);
  }

  function prune(nowSeconds: number): void {
    for (const [jti, exp] of outstanding) if (exp <= nowSeconds) outstanding.delete(jti);
  }

  return {
    async issuePair(userId) {
      return {
        refresh: await sign('refresh', userId, options.refreshTtlSeconds),
        access: await sign('access', userId, options.accessTtlSeconds),
      };
    },
    issueAccess: (userId) => sign('access', userId, options.accessTtlSeconds),
    issueRefresh: (userId) => sign('refresh', userId, options.refreshTtlSeconds),
    async verify(token, expected) {
      try {
        const { payload } = await jwtVerify(token, key, {
          algorithms: ['HS256'],
          currentDate: new Date(now()),
          requiredClaims: ['exp', 'iat', 'jti'],
        });
        if (payload.token_type !== expected || typeof payload.jti !== 'string') return null;
        if (!outstanding.has(payload.jti)) return null;
        return payload as unknown as TokenClaims;
      } catch {
        return null;
      }
    },
    blacklist(jti) {
      outstanding.delete(jti);
    },
    revokeAll() {
      outstanding.clear();
    },
    rotateSigningKey() {
      // The registry is left alone on purpose: old tokens must fail on their signature, as at the provider.
      key = newKey();
    },
  };
}

function newKey(): Uint8Array {
  return new Uint8Array(randomBytes(32));
}
