// Builds provider usage (SPEC §11): the quotas per client and account and the usage ledger, once per replica.
import type { Caller } from '../callers/caller';
import type { GatewayConfig } from '../config/gateway-config';
import { createRedisClient, quitRedis } from '../store/redis-connection';
import { type Durability, watchDurability } from '../store/redis-durability';
import { createUsage, type QuotaLimits, type Usage } from '../usage';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';
import type { Redis } from './redis';

/** Usage, and where its quotas come from once the client registry exists (it is built after the accounts). */
export interface BuiltUsage {
  readonly usage: Usage;
  /** Names the registry the quotas are read from (each call reads the entry now: a reload applies at once). */
  quotasFrom(registry: { findById(clientId: string): Caller | undefined }): void;
  /** Whether the Redis holding the ledger and the quotas keeps them (/readyz detail); undefined without Redis. */
  durability(): Durability | undefined;
}

/**
 * Closed after the servers drained and before Redis closes (closers run in reverse: it is made after Redis and
 * before the servers): a graceful stop writes the ledger a last time and gives unused quota units back.
 */
export function buildUsage(
  config: GatewayConfig,
  redis: Redis,
  { logger, metrics }: Observability,
): Promise<Built<BuiltUsage>> {
  return building((closers) => {
    let findById: (clientId: string) => Caller | undefined = () => undefined;
    // USAGE_REDIS_*: a durable Redis of their own, quit after the ledger's last write (closers run in reverse).
    const own = config.usage.redis && createRedisClient(config.usage.redis);
    if (own) {
      own.on('error', (error: Error) =>
        logger.debug({ error: error.message }, 'usage store (USAGE_REDIS_*) connection error'),
      );
      closers.push(() => quitRedis(own));
    }
    const store = own || redis.client;
    const watch = store && watchDurability(store);
    if (watch) closers.push(async () => watch.stop());
    const usage = createUsage({
      redis: store,
      keyPrefix: config.redis.keyPrefix,
      settings: config.usage,
      limitsOf: (clientId): QuotaLimits | undefined => findById(clientId)?.quota,
      logger,
      registry: metrics.registry,
    });
    closers.push(() => usage.close());
    return {
      usage,
      quotasFrom(registry) {
        findById = (clientId) => registry.findById(clientId);
      },
      durability: () => watch?.latest(),
    };
  });
}
