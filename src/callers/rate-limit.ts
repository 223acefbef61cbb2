// Per-client rate limits (express-rate-limit) with counters in Redis shared by every replica, memory when Redis is down.
import type { RequestHandler } from 'express';
import {
  type ClientRateLimitInfo,
  rateLimit as expressRateLimit,
  type IncrementResponse,
  ipKeyGenerator,
  MemoryStore,
  type Options,
  type Store,
} from 'express-rate-limit';
import { GatewayError } from '../http/gateway-error';
import type { Metrics } from '../observability/metrics';
import type { RedisClient } from '../store/redis-connection';
import { QuotaLeaseStore } from './quota-lease-store';

type LogFn = (fields: Record<string, unknown>, message: string) => void;
export interface RateLimitLogger {
  info: LogFn;
  warn: LogFn;
  error: LogFn;
}

export interface RateLimitOptions {
  /** The shared ioredis client; absent (local mode) means each replica counts in memory. */
  readonly redis?: RedisClient;
  /** REDIS_KEY_PREFIX; counters live under `<prefix>rl:<windowSeconds>:<clientId>`. */
  readonly keyPrefix: string;
  /** RATE_LIMIT_DEFAULT_*: for callers whose registry entry sets no limit (and SSO clients not in the registry). */
  readonly defaultLimit: { readonly limit: number; readonly windowSeconds: number };
  readonly metrics: Pick<Metrics, 'rateLimitRejections' | 'rateLimitFallbacks'>;
  readonly logger: RateLimitLogger;
  /** After a failed Redis call, decide from memory this long before trying Redis again. Default 1000 ms. */
  readonly redisRetryMs?: number;
}

/**
 * One express-rate-limit instance per distinct limit and window (its limit and windowMs are per instance), built
 * on first use from the caller's registry entry or the default. Keyed by client id, so one client's budget is shared
 * by all its keys, tokens and replicas.
 */
export function rateLimit(options: RateLimitOptions): RequestHandler {
  const limiters = new Map<string, RequestHandler>();
  const outage = new OutageTracker(options);
  const erlLogger = {
    warn: (error: unknown, message?: string) =>
      options.logger.warn({ err: error }, message ?? 'rate limiter'),
    error: (error: unknown, message?: string) =>
      options.logger.error({ err: error }, message ?? 'rate limiter'),
  };

  const limiterFor = (limit: number, windowSeconds: number): RequestHandler => {
    const id = `${limit}/${windowSeconds}`;
    let limiter = limiters.get(id);
    if (!limiter) {
      const memory = new MemoryStore();
      const store = options.redis
        ? new FallbackStore(
            new QuotaLeaseStore({
              redis: options.redis,
              prefix: `${options.keyPrefix}rl:${windowSeconds}:`,
              limit,
            }),
            memory,
            options.redis,
            outage,
          )
        : memory;
      limiter = expressRateLimit({
        windowMs: windowSeconds * 1000,
        limit,
        keyGenerator: (req) => (req.caller ? req.caller.id : `ip:${ipKeyGenerator(req.ip ?? '')}`),
        standardHeaders: 'draft-7',
        legacyHeaders: false,
        store,
        // FallbackStore already answers from memory when Redis fails; should anything still throw, let the
        // request through rather than answer 500 (SPEC §4: fail open to availability).
        passOnStoreError: true,
        handler: (req, res, next) => {
          const client = req.caller?.id ?? 'anonymous';
          options.metrics.rateLimitRejections.inc({ client });
          const retryAfter = String(res.getHeader('retry-after') ?? windowSeconds);
          next(
            new GatewayError(
              'RATE_LIMITED',
              `The client "${client}" exceeded its limit of ${String(limit)} requests per ${windowSeconds} s; retry after ${retryAfter} s.`,
              { headers: { 'Retry-After': retryAfter } },
            ),
          );
        },
        // Limiters for new limits are created lazily inside a request, which the first check flags. The second
        // (one limiter per request) holds by construction and costs a WeakMap entry per request.
        validate: { creationStack: false, singleCount: false },
        logger: erlLogger,
      } satisfies Partial<Options>);
      limiters.set(id, limiter);
    }
    return limiter;
  };

  limiterFor(options.defaultLimit.limit, options.defaultLimit.windowSeconds);
  return (req, res, next) => {
    const { limit, windowSeconds } = req.caller?.rateLimit ?? options.defaultLimit;
    limiterFor(limit, windowSeconds)(req, res, next);
  };
}

/** Logs the start and end of a Redis outage once each, and counts every decision taken from memory meanwhile. */
class OutageTracker {
  private down = false;
  private retryAt = 0;

  constructor(private readonly options: RateLimitOptions) {}

  /** Whether to try Redis for this decision. */
  shouldTry(redis: RedisClient): boolean {
    if (redis.status !== 'ready') {
      this.failed(undefined, redis.status);
      return false;
    }
    return !this.down || Date.now() >= this.retryAt;
  }

  failed(error: unknown, status?: string): void {
    this.retryAt = Date.now() + (this.options.redisRetryMs ?? 1_000);
    if (this.down) return;
    this.down = true;
    this.options.logger.warn(
      { err: error instanceof Error ? { message: error.message } : undefined, redisStatus: status },
      'rate limiter cannot reach Redis; counting in replica memory until it is back',
    );
  }

  recovered(): void {
    if (!this.down) return;
    this.down = false;
    this.options.logger.info({}, 'rate limiter reaches Redis again; counters are shared across replicas');
  }

  fellBack(): void {
    this.options.metrics.rateLimitFallbacks.inc();
  }
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
