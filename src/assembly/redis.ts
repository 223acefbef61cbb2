// Builds the shared Redis connection (none in local mode or for a single replica) and the one judge of its health.
import type { GatewayConfig } from '../config/gateway-config';
import { createRedisClient, quitRedis, type RedisClient } from '../store/redis-connection';
import { createRedisHealth, type StoreHealth } from '../store/redis-health';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';

export interface Redis {
  /** Absent in local mode or for a single replica: everything lives in this process. */
  readonly client?: RedisClient;
  readonly health: StoreHealth;
}

export function buildRedis(config: GatewayConfig, { logger, metrics }: Observability): Promise<Built<Redis>> {
  return building((closers) => {
    const redis = createRedisClient(config.redis);
    if (redis) closers.push(() => quitRedis(redis));
    else
      logger.warn(
        'no Redis configured: tokens and rate limits live in this process only (local mode / one replica)',
      );
    return { client: redis, health: createRedisHealth(redis, logger, metrics) };
  });
}
