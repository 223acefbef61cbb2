// A minimal OpenID provider on loopback for crafting what a real one never sends: discovery, its keys, and any
// logout token (tests of the relying party's checks; login flows use the real oidc-provider).
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import pino, { type Logger } from 'pino';
import type { ClientRegistry } from '../../../src/callers/client-registry';
import { errorEnvelopeHandler } from '../../../src/http/error-envelope';
import { type BrowserSessions, createBrowserSessions } from '../../../src/sessions/browser-sessions';
import { createRelyingParty } from '../../../src/sessions/relying-party';
import { createMemorySessionIndex } from '../../../src/sessions/session-index';
import { createMemoryTokenStore } from '../../../src/store/memory-token-store';
import { type Clock, systemClock } from '../../../src/tokens';
import { createRecordSeal } from '../../../src/tokens/internal/record-seal';
import { createTokenCipher } from '../../../src/tokens/internal/token-cipher';
import type { TokenStore } from '../../../src/tokens/internal/token-store';

export const CLIENT_ID = 'web-app';
export const BACKCHANNEL_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

export interface FakeProvider {
  readonly issuer: string;
  /** Signs `claims` with the provider's key; iss, aud, iat and jti are filled unless given (undefined removes). */
  logoutToken(claims: Record<string, unknown>): Promise<string>;
  /** Signs an ID token for the web app with the provider's key (iss, aud, iat, exp filled). */
  idToken(claims: Record<string, unknown>): Promise<string>;
  /** How the token endpoint answers (default: never, the request hangs until the server closes). */
  tokenEndpoint?: (req: IncomingMessage, res: ServerResponse) => void;
  /** Fields added to (or replacing those of) the discovery document. */
  discoveryExtra?: Record<string, unknown>;
  close(): Promise<void>;
}

export async function startFakeProvider(): Promise<FakeProvider> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (url === '/.well-known/openid-configuration') {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          issuer: provider.issuer,
          authorization_endpoint: `${provider.issuer}/auth`,
          token_endpoint: `${provider.issuer}/token`,
          jwks_uri: `${provider.issuer}/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['ES256'],
          ...provider.discoveryExtra,
        }),
      );
    } else if (url === '/jwks') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    } else if (url === '/token') {
      provider.tokenEndpoint?.(req, res);
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const provider: FakeProvider = {
    issuer: `http://127.0.0.1:${port}`,
    async logoutToken(claims) {
      const payload: JWTPayload = {
        iss: provider.issuer,
        aud: CLIENT_ID,
        iat: Math.floor(Date.now() / 1000),
        jti: randomBytes(8).toString('hex'),
        events: { [BACKCHANNEL_EVENT]: {} },
        ...claims,
      };
      for (const [name, value] of Object.entries(payload)) if (value === undefined) delete payload[name];
      return new SignJWT(payload)
        .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'logout+jwt' })
        .sign(privateKey);
    },
    idToken: (claims) =>
      new SignJWT({ iss: provider.issuer, aud: CLIENT_ID, ...claims })
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return provider;
}

export interface SessionsAtFakeProvider {
  readonly app: express.Express;
  readonly sessions: BrowserSessions;
  readonly store: TokenStore;
}

/** Browser sessions (memory store) whose relying party is the fake provider, behind the gateway's error envelope. */
export function sessionsAt(
  provider: FakeProvider,
  options: {
    lockTtlMs?: number;
    logger?: Logger;
    store?: TokenStore;
    registry?: Pick<ClientRegistry, 'findWebApp'>;
    /** The sessions' clock (the store keeps its own): a session may end while its record is still stored. */
    clock?: Clock;
    idleTimeoutSeconds?: number;
    maxLifetimeSeconds?: number;
    endSessionMethod?: 'get' | 'post';
  } = {},
): SessionsAtFakeProvider {
  const clock = options.clock ?? systemClock;
  const store = options.store ?? createMemoryTokenStore();
  const rp = createRelyingParty(
    {
      issuer: provider.issuer,
      clientId: CLIENT_ID,
      clientSecret: 'fake-secret',
      publicOrigin: 'https://gateway.example',
      scopes: 'openid',
      endSessionMethod: options.endSessionMethod,
    },
    { allowHttp: true, lockTtlMs: options.lockTtlMs ?? 15_000 },
  );
  const sessions = createBrowserSessions({
    store,
    index: createMemorySessionIndex(clock),
    seal: createRecordSeal(createTokenCipher(randomBytes(32)), { inc: () => undefined }),
    registry: options.registry ?? { findWebApp: () => undefined },
    clock,
    logger: options.logger ?? pino({ level: 'silent' }),
    keyPrefix: 'bff:',
    sessionOwner: `${provider.issuer} ${CLIENT_ID}`,
    relyingParty: () => rp,
    idleTimeoutSeconds: options.idleTimeoutSeconds ?? 1800,
    maxLifetimeSeconds: options.maxLifetimeSeconds ?? 43_200,
    revalidateSeconds: 300,
    lockTtlMs: options.lockTtlMs ?? 15_000,
    userKey: randomBytes(32),
  });
  const app = express();
  app.use(sessions.router);
  app.use(errorEnvelopeHandler());
  return { app, sessions, store };
}
