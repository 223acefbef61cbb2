// Builds browser sessions from the config: the one place the gateway's composition root calls into src/sessions.
import type { Logger } from 'pino';
import type { ClientRegistry } from '../callers/client-registry';
import type { GatewayConfig } from '../config/gateway-config';
import { deriveKey } from '../keys/derived-keys';
import type { RedisClient } from '../store/redis-connection';
import { type RecordSeal, systemClock, type TokenStore } from '../tokens';
import { type BrowserSessions, createBrowserSessions } from './browser-sessions';
import { createRelyingParty, type RelyingParty, type RelyingPartySettings } from './relying-party';
import { createMemorySessionIndex, createRedisSessionIndex } from './session-index';

export type { BrowserSessions } from './browser-sessions';

export interface SessionsDeps {
  readonly config: GatewayConfig;
  readonly redis?: RedisClient;
  readonly tokenStore: TokenStore;
  /** The tokens' record seal (TOKEN_ENCRYPTION_KEY): one seal for everything the fleet shares in Redis. */
  readonly seal: RecordSeal;
  readonly registry: ClientRegistry;
  readonly logger: Logger;
}

export interface BuiltSessions {
  readonly sessions: BrowserSessions;
  /** Local mode: the relying party of the development provider, known once the gateway listens. */
  connect(settings: RelyingPartySettings): void;
}

/** Undefined when browser sessions are off (no SESSION_ISSUER outside local mode). */
export function buildBrowserSessions(deps: SessionsDeps): BuiltSessions | undefined {
  const { config, redis, logger } = deps;
  const settings = config.sessions;
  if (!settings) return undefined;
  const encryptionKey = config.tokens.encryptionKey;
  const rpOptions = { allowHttp: !config.production, lockTtlMs: config.tokens.lockTtlMs };
  let relyingParty: RelyingParty | undefined =
    settings.issuer && settings.clientSecret && settings.publicUrl
      ? createRelyingParty(
          {
            issuer: settings.issuer,
            clientId: settings.clientId,
            clientSecret: settings.clientSecret,
            publicOrigin: settings.publicUrl,
            scopes: settings.scopes,
            clientAuthMethod: settings.clientAuthMethod,
            endSessionMethod: settings.endSessionMethod,
          },
          rpOptions,
        )
      : undefined;
  const sessions = createBrowserSessions({
    store: deps.tokenStore,
    index: redis ? createRedisSessionIndex(redis) : createMemorySessionIndex(systemClock),
    seal: deps.seal,
    registry: deps.registry,
    clock: systemClock,
    logger,
    keyPrefix: config.redis.keyPrefix,
    // Local mode's development provider lives as long as the process and its memory store.
    sessionOwner: `${settings.issuer ?? 'local-development-provider'} ${settings.clientId}`,
    relyingParty: () => relyingParty,
    idleTimeoutSeconds: settings.idleTimeoutSeconds,
    maxLifetimeSeconds: settings.maxLifetimeSeconds,
    revalidateSeconds: settings.revalidateSeconds,
    lockTtlMs: config.tokens.lockTtlMs,
    userKey: deriveKey(encryptionKey, 'session-user'),
  });
  return {
    sessions,
    connect(rpSettings) {
      relyingParty = createRelyingParty(rpSettings, rpOptions);
    },
  };
}
