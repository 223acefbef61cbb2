// Creates the one ioredis connection (standalone, Sentinel or Cluster) the gateway shares between its stores.
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { GatewayConfig } from '../config/gateway-config';

export type RedisClient = Redis | Cluster;

/**
 * Commands fail fast while Redis is unreachable (no offline queue, one retry) so a request never waits on it:
 * callers fall back to memory and ioredis keeps reconnecting in the background.
 */
const FAIL_FAST: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 2_000,
  commandTimeout: 1_000,
  retryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2_000),
  lazyConnect: false,
};

export function createRedisClient(redis: GatewayConfig['redis']): RedisClient | undefined {
  const { topology } = redis;
  const auth: RedisOptions = redis.password ? { password: redis.password } : {};
  const tls: RedisOptions = redis.tls ? { tls: {} } : {};
  switch (topology.kind) {
    case 'none':
      return undefined;
    case 'standalone':
      return new Redis(topology.url, { ...FAIL_FAST, ...auth, ...tls });
    case 'sentinel':
      return new Redis({
        ...FAIL_FAST,
        ...auth,
        ...tls,
        sentinels: topology.sentinels,
        name: topology.name,
        enableTLSForSentinelMode: redis.tls,
      });
    case 'cluster':
      return new Cluster(topology.nodes, {
        enableOfflineQueue: false,
        clusterRetryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2_000),
        redisOptions: { ...FAIL_FAST, ...auth, ...tls },
      });
  }
}
