// Per-client rate limits (express-rate-limit) with counters in Redis shared by every replica, memory when Redis is down.

import type { RequestHandler } from 'express';
import { rateLimit as expressRateLimit, type Options } from 'express-rate-limit';
import { GatewayError } from '../http/gateway-error';
import { rateLimitPrefix, userRateLimitPrefix } from '../keys/redis-keys';
import {
  clientIpKey,
  type LimiterOptions,
  limiterLogger,
  OutageTracker,
  sharedCounterStore,
} from './shared-counter-store';

export interface RateLimitOptions extends LimiterOptions {
  /** RATE_LIMIT_DEFAULT_*: for callers whose registry entry sets no limit (and SSO clients not in the registry). */
  readonly defaultLimit: { readonly limit: number; readonly windowSeconds: number };
}

/**
 * One express-rate-limit instance per distinct limit and window (its limit and windowMs are per instance), built
 * on first use from the caller's registry entry or the default. Keyed by client id, so one client's budget is shared
 * by all its keys, tokens and replicas.
 */
export function rateLimit(options: RateLimitOptions): RequestHandler {
  const limiters = new Map<string, RequestHandler>();
  const userLimiters = new Map<string, RequestHandler>();
  const outage = new OutageTracker({ ...options, name: 'rate limiter' });
  const erlLogger = limiterLogger(options.logger, 'rate limiter');

  const limiterFor = (limit: number, windowSeconds: number, perUser = false): RequestHandler => {
    const id = `${limit}/${windowSeconds}`;
    const cache = perUser ? userLimiters : limiters;
    let limiter = cache.get(id);
    if (!limiter) {
      const store = sharedCounterStore({
        redis: options.redis,
        prefix: perUser
          ? userRateLimitPrefix(options.keyPrefix, windowSeconds)
          : rateLimitPrefix(options.keyPrefix, windowSeconds),
        limit,
        outage,
      });
      limiter = expressRateLimit({
        windowMs: windowSeconds * 1000,
        limit,
        keyGenerator: (req) =>
          perUser
            ? `${req.caller?.id}:${req.caller?.user}`
            : req.caller
              ? req.caller.id
              : `ip:${clientIpKey(req)}`,
        standardHeaders: 'draft-7',
        legacyHeaders: false,
        store,
        // FallbackStore already answers from memory when Redis fails; should anything still throw, let the
        // request through rather than answer 500 (fail open to availability).
        passOnStoreError: true,
        handler: (req, res, next) => {
          const client = req.caller?.id ?? 'anonymous';
          options.metrics.rateLimitRejections.inc({
            client,
            reason: perUser ? 'user-limit' : 'client-limit',
          });
          const retryAfter = String(res.getHeader('retry-after') ?? windowSeconds);
          const who = perUser ? `This user of "${client}"` : `The client "${client}"`;
          next(
            new GatewayError(
              'RATE_LIMITED',
              `${who} exceeded its limit of ${String(limit)} requests per ${windowSeconds} s; retry after ${retryAfter} s.`,
              { headers: { 'Retry-After': retryAfter } },
            ),
          );
        },
        // Limiters for new limits are created lazily inside a request, which the first check flags. The second
        // (one limiter per request) holds by construction and costs a WeakMap entry per request.
        validate: { creationStack: false, singleCount: false },
        logger: erlLogger,
      } satisfies Partial<Options>);
      cache.set(id, limiter);
    }
    return limiter;
  };

  limiterFor(options.defaultLimit.limit, options.defaultLimit.windowSeconds);
  return (req, res, next) => {
    const { limit, windowSeconds } = req.caller?.rateLimit ?? options.defaultLimit;
    const perUser = req.caller?.user === undefined ? undefined : req.caller.userRateLimit;
    if (!perUser) {
      limiterFor(limit, windowSeconds)(req, res, next);
      return;
    }
    // A browser session's user is counted twice: within the web app's budget, and within its own.
    limiterFor(limit, windowSeconds)(req, res, (error?: unknown) => {
      if (error) next(error);
      else limiterFor(perUser.limit, perUser.windowSeconds, true)(req, res, next);
    });
  };
}
