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
import { Cluster } from 'ioredis';
import { type RedisReply, RedisStore } from 'rate-limit-redis';
import { GatewayError } from '../http/gateway-error';
import type { Metrics } from '../observability/metrics';
import type { RedisClient } from '../store/redis-connection';

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
 * One express-rate-limit instance per distinct window length (its windowMs is per instance), built on first
 * use; the limit itself is read per request from req.caller. Keyed by client id, so one client's budget is
 * shared by all its keys, tokens and replicas.
 */
export function rateLimit(options: RateLimitOptions): RequestHandler {
  const limiters = new Map<number, RequestHandler>();
  const outage = new OutageTracker(options);
  const erlLogger = {
    warn: (error: unknown, message?: string) =>
      options.logger.warn({ err: error }, message ?? 'rate limiter'),
    error: (error: unknown, message?: string) =>
      options.logger.error({ err: error }, message ?? 'rate limiter'),
  };

  const limiterFor = (windowSeconds: number): RequestHandler => {
    let limiter = limiters.get(windowSeconds);
    if (!limiter) {
      const memory = new MemoryStore();
      const store = options.redis
        ? new FallbackStore(
            new RedisStore({
              // One round trip per request: EVALSHA of the increment script (loaded at init).
              sendCommand: redisCommand(options.redis),
              prefix: `${options.keyPrefix}rl:${windowSeconds}:`,
            }),
            memory,
            options.redis,
            outage,
          )
        : memory;
      limiter = expressRateLimit({
        windowMs: windowSeconds * 1000,
        limit: (req) => req.caller?.rateLimit?.limit ?? options.defaultLimit.limit,
        keyGenerator: (req) => (req.caller ? req.caller.id : `ip:${ipKeyGenerator(req.ip ?? '')}`),
        standardHeaders: 'draft-7',
        legacyHeaders: false,
        store,
        // FallbackStore already answers from memory when Redis fails; should anything still throw, let the
        // request through rather than answer 500 (SPEC §4: fail open to availability).
        passOnStoreError: true,
        handler: (req, res, next, used) => {
          const client = req.caller?.id ?? 'anonymous';
          options.metrics.rateLimitRejections.inc({ client });
          const retryAfter = String(res.getHeader('retry-after') ?? windowSeconds);
          const limit = (req as { rateLimit?: { limit: number } }).rateLimit?.limit ?? used.limit;
          next(
            new GatewayError(
              'RATE_LIMITED',
              `The client "${client}" exceeded its limit of ${String(limit)} requests per ${windowSeconds} s; retry after ${retryAfter} s.`,
              { headers: { 'Retry-After': retryAfter } },
            ),
          );
        },
        // Limiters for new window lengths are created lazily inside a request, which this check flags.
        validate: { creationStack: false },
        logger: erlLogger,
      } satisfies Partial<Options>);
      limiters.set(windowSeconds, limiter);
    }
    return limiter;
  };

  limiterFor(options.defaultLimit.windowSeconds);
  return (req, res, next) => {
    const windowSeconds = req.caller?.rateLimit?.windowSeconds ?? options.defaultLimit.windowSeconds;
    limiterFor(windowSeconds)(req, res, next);
  };
}

/**
 * Raw commands for rate-limit-redis over the shared ioredis client. On a Cluster, EVALSHA is routed by its key,
 * but SCRIPT LOAD has no key and would reach one random node: it is sent to every master instead.
 */
function redisCommand(redis: RedisClient): (...command: string[]) => Promise<RedisReply> {
  // Standalone and Sentinel: the EVALSHAs of one event-loop turn share a pipeline (one write, one read).
  const evalsha = redis instanceof Cluster ? undefined : pipelinedEvalsha(redis);
  return async (command, ...args) => {
    if (evalsha && command === 'EVALSHA') return evalsha(args);
    if (redis instanceof Cluster && command.toUpperCase() === 'SCRIPT') {
      const replies = await Promise.all(redis.nodes('master').map((node) => node.call(command, ...args)));
      return replies[0] as RedisReply;
    }
    return (await redis.call(command as string, ...args)) as RedisReply;
  };
}

interface PendingEval {
  readonly args: string[];
  resolve(reply: RedisReply): void;
  reject(error: unknown): void;
}

/**
 * Batches the EVALSHA calls issued while the event loop handles one round of I/O, and sends them as one pipeline
 * when that round ends (setImmediate): under load each request still costs one Redis round trip, but many
 * requests share each socket write and read. A lone call waits only for the end of the current I/O round and
 * goes out as a plain command. Each call gets its own reply or error (a NOSCRIPT, an outage), as unbatched.
 */
function pipelinedEvalsha(redis: Exclude<RedisClient, Cluster>): (args: string[]) => Promise<RedisReply> {
  let batch: PendingEval[] = [];
  const settle = (pending: PendingEval, error: unknown, reply: unknown) => {
    if (error) pending.reject(error);
    else pending.resolve(reply as RedisReply);
  };
  const flush = () => {
    const pending = batch;
    batch = [];
    if (pending.length === 1) {
      const only = pending[0] as PendingEval;
      redis.call('EVALSHA', ...only.args).then(
        (reply) => settle(only, null, reply),
        (error: unknown) => settle(only, error, undefined),
      );
      return;
    }
    const pipeline = redis.pipeline();
    for (const { args } of pending) pipeline.call('EVALSHA', ...args);
    pipeline.exec().then(
      (results) => {
        pending.forEach((call, i) => {
          const result = results?.[i];
          if (result) settle(call, result[0], result[1]);
          else settle(call, new Error('Redis pipeline returned no reply'), undefined);
        });
      },
      (error: unknown) => {
        for (const call of pending) settle(call, error, undefined);
      },
    );
  };
  return (args) =>
    new Promise<RedisReply>((resolve, reject) => {
      if (batch.length === 0) setImmediate(flush);
      batch.push({ args, resolve, reject });
    });
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
  /** RedisStore caches its scripts' SHA promises; a load that failed during an outage must be redone. */
  private scriptsFailed = false;

  constructor(
    private readonly redisStore: RedisStore,
    private readonly memory: MemoryStore,
    private readonly redis: RedisClient,
    private readonly outage: OutageTracker,
  ) {}

  init(options: Options): void {
    this.memory.init(options);
    this.redisStore.init(options).catch(() => {
      this.scriptsFailed = true;
    });
  }

  async increment(key: string): Promise<IncrementResponse> {
    if (this.outage.shouldTry(this.redis)) {
      try {
        this.reloadScriptsIfNeeded();
        const result = await this.redisStore.increment(key);
        this.outage.recovered();
        return result;
      } catch (error) {
        this.outage.failed(error);
      }
    }
    this.outage.fellBack();
    return this.memory.increment(key);
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    try {
      return await this.redisStore.get(key);
    } catch {
      return this.memory.get(key);
    }
  }

  async decrement(key: string): Promise<void> {
    await this.memory.decrement(key);
    await this.redisStore.decrement(key).catch(() => undefined);
  }

  async resetKey(key: string): Promise<void> {
    await this.memory.resetKey(key);
    await this.redisStore.resetKey(key).catch(() => undefined);
  }

  shutdown(): void {
    this.memory.shutdown();
  }

  private reloadScriptsIfNeeded(): void {
    if (!this.scriptsFailed) return;
    this.scriptsFailed = false;
    const markFailed = () => {
      this.scriptsFailed = true;
    };
    this.redisStore.incrementScriptSha = this.redisStore.loadIncrementScript();
    this.redisStore.getScriptSha = this.redisStore.loadGetScript();
    this.redisStore.incrementScriptSha.catch(markFailed);
    this.redisStore.getScriptSha.catch(markFailed);
  }
}
