// Builds the token lifecycle: credentials, the shared store, the token client and the token manager, started.
import type { GatewayConfig } from '../config/gateway-config';
import { deriveKey } from '../keys/derived-keys';
import { registerAccessTokenTimeLeft } from '../observability/metrics';
import { createMemoryTokenStore } from '../store/memory-token-store';
import { createRedisTokenStore } from '../store/redis-token-store';
import {
  type CredentialSource,
  createCredentialSource,
  createRecordSeal,
  createTokenCipher,
  createTokenClient,
  createTokenManager,
  type RecordSeal,
  type TokenProvider,
  type TokenStore,
} from '../tokens';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';
import type { Redis } from './redis';
import type { Upstream } from './upstream';

/** How long start-up waits for Redis before serving degraded (tokens from this replica's own login). */
const REDIS_START_WAIT_MS = 2_000;

export interface Tokens {
  readonly tokens: TokenProvider;
  readonly credentials: CredentialSource;
  /** The shared store, also used by browser sessions for their records and per-session locks. */
  readonly store: TokenStore;
  /** Seals what the fleet shares in Redis (TOKEN_ENCRYPTION_KEY); plan answers are sealed with it too. */
  readonly seal: RecordSeal;
}

export function buildTokens(
  config: GatewayConfig,
  upstream: Upstream,
  { client: redis, health }: Redis,
  { logger, metrics, tracing }: Observability,
): Promise<Built<Tokens>> {
  return building(async (closers) => {
    const encryptionKey = config.tokens.encryptionKey;
    const fingerprintKey = encryptionKey && deriveKey(encryptionKey, 'credential-fingerprint');
    const credentials =
      upstream.credentials ?? (await createCredentialSource(config.credentials, { logger, fingerprintKey }));
    closers.push(() => credentials.close());

    const tokenStore = redis ? createRedisTokenStore({ client: redis, logger }) : createMemoryTokenStore();
    // Closes its pub/sub connection (a duplicate of `redis`) before `redis` itself quits.
    closers.push(() => tokenStore.close());
    const tokenClient = createTokenClient({
      baseUrl: upstream.baseUrl,
      timeoutMs: config.upstream.timeoutMs,
      headers: config.upstream.staticHeaders,
      extraCa: config.upstream.extraCa,
    });
    closers.push(() => tokenClient.close?.());
    const seal = createRecordSeal(createTokenCipher(encryptionKey), metrics.storeRecordsRejected);
    const tokens = createTokenManager({
      store: tokenStore,
      client: tokenClient,
      credentials,
      logger,
      metrics,
      tracing,
      seal,
      storeHealth: health,
      settings: {
        upstreamBaseUrl: upstream.baseUrl,
        refreshSkewSeconds: config.tokens.refreshSkewSeconds,
        lockTtlMs: config.tokens.lockTtlMs,
        lockWaitMs: config.tokens.lockWaitMs,
        loginMinIntervalMs: config.tokens.loginMinIntervalMs,
        loginMaxIntervalMs: config.tokens.loginMaxIntervalMs,
        keyPrefix: config.redis.keyPrefix,
      },
    });
    await health.waitAtStart(REDIS_START_WAIT_MS);
    await tokens.start();
    closers.push(() => tokens.stop());
    registerAccessTokenTimeLeft(metrics, () => tokens.status().accessExpiresAt);
    return { tokens, credentials, store: tokenStore, seal };
  });
}
