// Builds the shared Redis connection (none in local mode or for a single replica) and watches its health.
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/gateway-config';
import type { Metrics } from '../observability/metrics';
import { createRedisClient, type RedisClient } from '../store/redis-connection';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';

export function buildRedis(
  config: GatewayConfig,
  { logger, metrics }: Observability,
): Promise<Built<RedisClient | undefined>> {
  return building((closers) => {
    const redis = createRedisClient(config.redis);
    if (redis) closers.push(() => quitRedis(redis));
    else
      logger.warn(
        'no Redis configured: tokens and rate limits live in this process only (local mode / one replica)',
      );
    watchRedisHealth(redis, logger, metrics);
    return redis;
  });
}

async function quitRedis(redis: RedisClient): Promise<void> {
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}

/** Logs each Redis outage once (ioredis retries on its own) and keeps the store-health gauge current. */
function watchRedisHealth(redis: RedisClient | undefined, logger: Logger, metrics: Metrics): void {
  if (!redis) {
    metrics.storeHealthy.set(1);
    return;
  }
  let down = false;
  redis.on('ready', () => {
    metrics.storeHealthy.set(1);
    if (down) logger.info('redis reachable again');
    down = false;
  });
  redis.on('close', () => metrics.storeHealthy.set(0));
  redis.on('error', (error: Error) => {
    metrics.storeHealthy.set(0);
    if (!down) logger.warn({ error: error.message }, 'redis unreachable: serving from memory, reconnecting');
    down = true;
  });
}
