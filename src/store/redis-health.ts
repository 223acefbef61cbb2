// The one judge of Redis health: the only writer of token_store_healthy and of the Redis down/up log lines.
import type { Logger } from 'pino';
import type { Metrics } from '../observability/metrics';
import { type RedisClient, whenRedisReady } from './redis-connection';

export interface StoreHealth {
  /** Redis answers right now (always true without Redis: memory cannot be down). */
  healthy(): boolean;
  /**
   * A Redis call of `noticedBy` failed (token cache, a limiter): a hung Redis keeps its connection "ready" but
   * times out. The users of Redis log nothing of it: the owner's down line names the first one to notice.
   */
  reportFailure(error?: unknown, noticedBy?: string): void;
  /** A Redis call succeeded. */
  reportSuccess(): void;
  /** Start-up waits at most `timeoutMs` for Redis; false (announced as the outage's one down line) starts degraded. */
  waitAtStart(timeoutMs: number): Promise<boolean>;
}

/** Watches the connection (ioredis retries on its own) and what its users report; each outage is logged once. */
export function createRedisHealth(
  redis: RedisClient | undefined,
  logger: Logger,
  metrics: Pick<Metrics, 'storeHealthy'>,
): StoreHealth {
  let up = redis ? redis.status === 'ready' : true;
  let announcedDown = false;
  metrics.storeHealthy.set(up ? 1 : 0);
  const set = (healthy: boolean) => {
    metrics.storeHealthy.set(healthy ? 1 : 0);
    up = healthy;
  };
  const markUp = () => {
    set(true);
    if (announcedDown) logger.info('redis reachable again');
    announcedDown = false;
  };
  const markDown = (error?: unknown, noticedBy?: string) => {
    set(false);
    if (!announcedDown) {
      const message = error instanceof Error ? error.message : undefined;
      logger.warn({ error: message, noticedBy }, 'redis unreachable: serving from memory, reconnecting');
    }
    announcedDown = true;
  };
  if (redis) {
    redis.on('ready', markUp);
    // A closed connection (also a quit at shutdown) is down, but only an error is worth a log line.
    redis.on('close', () => set(false));
    redis.on('error', markDown);
  }
  return {
    healthy: () => up,
    reportFailure: (error, noticedBy) => {
      if (redis) markDown(error, noticedBy);
    },
    reportSuccess: () => {
      if (!up) markUp();
    },
    async waitAtStart(timeoutMs) {
      if (!redis || (await whenRedisReady(redis, timeoutMs))) return true;
      set(false);
      if (!announcedDown)
        logger.warn({ waitedMs: timeoutMs }, 'redis not reachable at start: starting degraded');
      announcedDown = true;
      return false;
    },
  };
}
