// The express-rate-limit store behind every limiter: counters in Redis shared by the fleet, replica memory when
// Redis fails, each failure told to the Redis-health owner (it alone logs the outage) and every decision taken from
// memory counted.
import type { Request } from 'express';
import {
  type ClientRateLimitInfo,
  type IncrementResponse,
  ipKeyGenerator,
  type Logger,
  MemoryStore,
  type Options,
  type Store,
} from 'express-rate-limit';
import type { Metrics } from '../observability/metrics';
import type { RedisClient } from '../store/redis-connection';
import type { StoreHealth } from '../store/redis-health';
import { carriedIpv4 } from './carried-ipv4';
import { QuotaLeaseStore } from './quota-lease-store';

type LogFn = (fields: Record<string, unknown>, message: string) => void;
export interface CounterStoreLogger {
  info: LogFn;
  warn: LogFn;
  error: LogFn;
}

/** express-rate-limit's own logger (error first), as lines of ours naming the limiter. */
export function limiterLogger(logger: CounterStoreLogger, name: string): Logger {
  return {
    warn: (error: unknown, message?: string) => logger.warn({ err: error }, message ?? name),
    error: (error: unknown, message?: string) => logger.error({ err: error }, message ?? name),
  };
}

/**
 * A caller's address as every limiter counts it (TRUST_PROXY decides req.ip), IPv6 reduced to its /56, and an IPv4
 * caller carried in IPv6 (NAT64, 6to4, Teredo) as its IPv4 address.
 */
export function clientIpKey(req: Request): string {
  const ip = req.ip ?? '';
  return ipKeyGenerator(carriedIpv4(ip) ?? ip);
}

export interface OutageTrackerOptions {
  /** Names the limiter to the Redis-health owner ("rate limiter", "authentication-failure limiter"). */
  readonly name: string;
  readonly metrics: Pick<Metrics, 'rateLimitFallbacks'>;
  /** After a failed Redis call, decide from memory this long before trying Redis again. Default 1000 ms. */
  readonly redisRetryMs?: number;
  /** Told of failed and recovered Redis calls: the Redis-health owner judges and reports Redis health. */
  readonly health?: Pick<StoreHealth, 'reportFailure' | 'reportSuccess'>;
}

/** What every limiter counts with: the shared Redis (replica memory without it) and where it reports. */
export interface LimiterOptions extends Omit<OutageTrackerOptions, 'name'> {
  readonly logger: CounterStoreLogger;
  /** The shared ioredis client; absent (local mode) means each replica counts in memory. */
  readonly redis?: RedisClient;
  /** REDIS_KEY_PREFIX, under which src/keys/redis-keys.ts names the limiter's counters. */
  readonly keyPrefix: string;
  readonly metrics: Pick<Metrics, 'rateLimitRejections' | 'rateLimitFallbacks'>;
}

/**
 * Paces a limiter's Redis retries during an outage, tells the Redis-health owner of its failures and of the
 * recovery (the owner alone logs them), and counts every decision taken from memory meanwhile.
 */
export class OutageTracker {
  private down = false;
  private retryAt = 0;

  constructor(private readonly options: OutageTrackerOptions) {}

  /** Whether to try Redis for this decision. */
  shouldTry(redis: RedisClient): boolean {
    if (redis.status !== 'ready') {
      this.failed(undefined);
      return false;
    }
    return !this.down || Date.now() >= this.retryAt;
  }

  /** A Redis call failed (`error`), or the connection is not ready (undefined: the owner already knows). */
  failed(error: unknown): void {
    this.retryAt = Date.now() + (this.options.redisRetryMs ?? 1_000);
    this.down = true;
    if (error !== undefined) this.options.health?.reportFailure(error, this.options.name);
  }

  recovered(): void {
    if (!this.down) return;
    this.down = false;
    this.options.health?.reportSuccess();
  }

  fellBack(): void {
    this.options.metrics.rateLimitFallbacks.inc();
  }
}

export interface CounterStoreOptions {
  /** Absent (local mode): counters in replica memory only. */
  readonly redis?: RedisClient;
  /** Counters live under `<prefix><key>` in Redis. */
  readonly prefix: string;
  /** The limit of every key of this store. */
  readonly limit: number;
  readonly outage: OutageTracker;
}

/** Redis with memory fallback when there is Redis; memory alone when there is none. */
export function sharedCounterStore(options: CounterStoreOptions): Store {
  const memory = new MemoryStore();
  if (!options.redis) return memory;
  const shared = new QuotaLeaseStore({ redis: options.redis, prefix: options.prefix, limit: options.limit });
  return new FallbackStore(shared, memory, options.redis, options.outage);
}

/**
 * Redis first, replica memory when Redis fails: the wrapper never throws, so a Redis outage never turns into a
 * 500 and never waits on reconnection (the client fails fast with no offline queue). Counts taken in memory
 * during an outage are not merged back; the window simply restarts in Redis.
 */
class FallbackStore implements Store {
  constructor(
    private readonly shared: QuotaLeaseStore,
    private readonly memory: MemoryStore,
    private readonly redis: RedisClient,
    private readonly outage: OutageTracker,
  ) {}

  init(options: Options): void {
    this.memory.init(options);
    this.shared.init(options);
  }

  /** Synchronous while the lease has hits left (the common case): no promise to create and wait for. */
  increment(key: string): IncrementResponse | Promise<IncrementResponse> {
    if (!this.outage.shouldTry(this.redis)) return this.fromMemory(key);
    let leased: IncrementResponse | Promise<IncrementResponse>;
    try {
      leased = this.shared.increment(key);
    } catch (error) {
      this.outage.failed(error);
      return this.fromMemory(key);
    }
    if (!(leased instanceof Promise)) return this.fromShared(leased);
    return leased.then(
      (result) => this.fromShared(result),
      (error: unknown) => {
        this.outage.failed(error);
        return this.fromMemory(key);
      },
    );
  }

  private fromShared(result: IncrementResponse): IncrementResponse {
    this.outage.recovered();
    return result;
  }

  private fromMemory(key: string): Promise<IncrementResponse> {
    this.outage.fellBack();
    return this.memory.increment(key);
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    return (await this.shared.get(key)) ?? this.memory.get(key);
  }

  async decrement(key: string): Promise<void> {
    await this.memory.decrement(key);
    await this.shared.decrement(key).catch(() => undefined);
  }

  async resetKey(key: string): Promise<void> {
    await this.memory.resetKey(key);
    await this.shared.resetKey(key).catch(() => undefined);
  }

  shutdown(): void {
    this.memory.shutdown();
  }
}
