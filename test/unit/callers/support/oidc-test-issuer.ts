// A local OIDC issuer for tests: RS256 keys, its JWKS and discovery document on loopback, and a token signer.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';

export interface SigningKey {
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
}

export interface TestIssuer {
  readonly issuer: string;
  readonly jwksUrl: string;
  /** The keys the JWKS currently publishes (first one signs by default). */
  keys: SigningKey[];
  jwksFetches: number;
  discoveryFetches: number;
  /** When set, the JWKS and discovery endpoints answer this status with no document (an issuer outage). */
  failWith?: number;
  /** Date.now() of the latest JWKS fetch (0 before any). */
  lastJwksFetchAt: number;
  sign(
    claims: JWTPayload,
    /** `typ`: the header's type, `at+jwt` (an RFC 9068 access token) by default; null leaves it out. */
    options?: { key?: SigningKey; expiresInSeconds?: number; alg?: string; typ?: string | null },
  ): Promise<string>;
  close(): Promise<void>;
}

export async function newSigningKey(kid: string = randomUUID()): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

export async function startTestIssuer(): Promise<TestIssuer> {
  let state: TestIssuer;
  const server: Server = createServer((req, res) => {
    if (req.url === '/jwks') {
      state.jwksFetches += 1;
      state.lastJwksFetchAt = Date.now();
      if (state.failWith) {
        res.statusCode = state.failWith;
        res.end();
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: state.keys.map((key) => key.publicJwk) }));
      return;
    }
    if (req.url === '/.well-known/openid-configuration') {
      state.discoveryFetches += 1;
      if (state.failWith) {
        res.statusCode = state.failWith;
        res.end();
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ issuer: state.issuer, jwks_uri: state.jwksUrl }));
      return;
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const issuer = `http://127.0.0.1:${port}`;
  state = {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    keys: [await newSigningKey()],
    jwksFetches: 0,
    discoveryFetches: 0,
    lastJwksFetchAt: 0,
    async sign(claims, options = {}) {
      const key = options.key ?? state.keys[0]!;
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: issuer, iat: now, exp: now + (options.expiresInSeconds ?? 300), ...claims })
        .setProtectedHeader({
          alg: options.alg ?? 'RS256',
          kid: key.kid,
          ...(options.typ !== null && { typ: options.typ ?? 'at+jwt' }),
        })
        .sign(key.privateKey);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return state;
}
