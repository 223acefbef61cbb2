// Creates the one ioredis connection (standalone, Sentinel or Cluster) the gateway shares between its stores.
import type { ConnectionOptions } from 'node:tls';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { GatewayConfig, RedisTopology } from '../config/gateway-config';
import { redisUsesTls } from '../config/production-rules';

export type RedisClient = Redis | Cluster;

export interface RedisConnectionOptions {
  /** false: give up after the first failed connection (the doctor); true (default): reconnect forever. */
  readonly retry?: boolean;
}

const backoff = (attempt: number) => Math.min(100 * 2 ** attempt, 2_000);

/**
 * Commands fail fast while Redis is unreachable (no offline queue, one retry) so a request never waits on it:
 * callers fall back to memory and ioredis keeps reconnecting in the background.
 */
const FAIL_FAST: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 2_000,
  commandTimeout: 1_000,
  lazyConnect: false,
};

/**
 * The TLS options of every Redis connection (nodes and Sentinels alike): extra CAs, and the client certificate a Redis
 * with tls-auth-clients asks for. Empty for plain TLS.
 */
export function redisTlsOptions(redis: GatewayConfig['redis']): ConnectionOptions {
  const files = redis.tlsFiles ?? {};
  return {
    ...(files.ca ? { ca: [...files.ca] } : {}),
    ...(files.cert && files.key ? { cert: files.cert, key: files.key } : {}),
  };
}

/** What the three topologies share: fail-fast commands, auth and TLS (REDIS_TLS, or a rediss:// URL). */
export function redisNodeOptions(
  redis: GatewayConfig['redis'],
  options: RedisConnectionOptions = {},
): RedisOptions {
  const topology = redis.topology;
  const tls = redisUsesTls(topology, redis.tls);
  return {
    ...FAIL_FAST,
    retryStrategy: options.retry === false ? () => null : backoff,
    ...(redis.password ? { password: redis.password } : {}),
    ...(tls ? { tls: redisTlsOptions(redis) } : {}),
  };
}

export function createRedisClient(
  redis: GatewayConfig['redis'],
  options: RedisConnectionOptions = {},
): RedisClient | undefined {
  const { topology } = redis;
  const node = redisNodeOptions(redis, options);
  switch (topology.kind) {
    case 'none':
      return undefined;
    case 'standalone':
      return new Redis(topology.url, node);
    case 'sentinel':
      // The sentinels are asked for the current master on every (re)connect: a failover is followed on its own.
      return new Redis({
        ...node,
        sentinels: topology.sentinels,
        name: topology.name,
        // REDIS_TLS covers the Sentinels too: without sentinelTLS ioredis asks them in plaintext (refused by a
        // TLS-only Sentinel, and open to an on-path rewrite of the master's address).
        enableTLSForSentinelMode: redis.tls,
        ...(redis.tls ? { sentinelTLS: redisTlsOptions(redis) } : {}),
        // Sentinels with a password: REDIS_SENTINEL_PASSWORD, else the master's (Bitnami's auth.sentinel, on by default,
        // gives them the same). A Sentinel without one still answers (ioredis warns once per connection).
        ...(redis.sentinelPassword ? { sentinelPassword: redis.sentinelPassword } : {}),
        sentinelRetryStrategy: options.retry === false ? () => null : backoff,
      });
    case 'cluster': {
      const cluster: ClusterOptions = {
        enableOfflineQueue: false,
        // A one-shot command (doctor, usage CLI) still allows two quick reconnects: ioredis closes a Cluster client it
        // just connected when its first ready check or slots refresh fails, and without them one transient answer
        // ended the command's only connection ("connection closed"; seen in test/system/redis-topologies.test.ts).
        clusterRetryStrategy:
          options.retry === false ? (attempt: number) => (attempt <= 2 ? 100 : null) : backoff,
        redisOptions: node,
        // Behind TLS the node addresses in CLUSTER SLOTS are IPs; keep the names the certificate was made for.
        ...(node.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
      };
      return new Cluster(topology.nodes, cluster);
    }
  }
}

/** A printable description of where Redis is: host and port only, never the URL's user or password. */
export function describeRedisTopology(topology: RedisTopology): string {
  switch (topology.kind) {
    case 'none':
      return 'no Redis';
    case 'standalone': {
      try {
        const url = new URL(topology.url);
        return `Redis ${url.protocol === 'rediss:' ? '(TLS) ' : ''}at ${url.hostname}:${url.port || '6379'}`;
      } catch {
        return 'Redis (REDIS_URL)';
      }
    }
    case 'sentinel':
      return `Redis master "${topology.name}" via Sentinel ${topology.sentinels.map((s) => `${s.host}:${s.port}`).join(', ')}`;
    case 'cluster':
      return `Redis Cluster ${topology.nodes.map((n) => `${n.host}:${n.port}`).join(', ')}`;
  }
}

/** A replica starting next to a reachable Redis joins the fleet's token instead of logging in on its own. */
export function whenRedisReady(redis: RedisClient, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ready);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    redis.once('ready', onReady);
  });
}

/** A polite close (QUIT after pending replies), or a hard one when the connection is already unusable. */
export async function quitRedis(redis: RedisClient): Promise<void> {
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}
