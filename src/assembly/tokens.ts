// Builds what every account's token lifecycle shares: the token store (Redis, or memory) and the record seal.
import type { GatewayConfig } from '../config/gateway-config';
import { deriveKey } from '../keys/derived-keys';
import { createMemoryTokenStore } from '../store/memory-token-store';
import { createRedisTokenStore } from '../store/redis-token-store';
import { createRecordSeal, createTokenCipher, type RecordSeal, type TokenStore } from '../tokens';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';
import type { Redis } from './redis';

/** How long start-up waits for Redis before serving degraded (tokens from this replica's own login). */
const REDIS_START_WAIT_MS = 2_000;

export interface SharedTokens {
  /** The shared store, also used by browser sessions for their records and per-session locks. */
  readonly store: TokenStore;
  /** Seals what the fleet shares in Redis (TOKEN_ENCRYPTION_KEY); plan answers are sealed with it too. */
  readonly seal: RecordSeal;
  /** deriveKey(TOKEN_ENCRYPTION_KEY, 'credential-fingerprint'): names credentials in Redis without revealing them. */
  readonly fingerprintKey?: Buffer;
}

export function buildSharedTokens(
  config: GatewayConfig,
  { client: redis, health }: Redis,
  { logger, metrics }: Observability,
): Promise<Built<SharedTokens>> {
  return building(async (closers) => {
    const encryptionKey = config.tokens.encryptionKey;
    const fingerprintKey = encryptionKey && deriveKey(encryptionKey, 'credential-fingerprint');
    const store = redis ? createRedisTokenStore({ client: redis, logger }) : createMemoryTokenStore();
    // Closes its pub/sub connection (a duplicate of `redis`) before `redis` itself quits.
    closers.push(() => store.close());
    const seal = createRecordSeal(createTokenCipher(encryptionKey), metrics.storeRecordsRejected);
    await health.waitAtStart(REDIS_START_WAIT_MS);
    return { store, seal, fingerprintKey };
  });
}
