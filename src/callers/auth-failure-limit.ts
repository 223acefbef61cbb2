// Failed authentications counted per client IP across the fleet (express-rate-limit on the failure path only); a
// blocked IP's unauthenticated requests are refused 429 from replica memory, before any hashing or verification.

import type { NextFunction, Request, Response } from 'express';
import { type AugmentedRequest, rateLimit as expressRateLimit, type Options } from 'express-rate-limit';
import { GatewayError, secondsToRetry } from '../http/gateway-error';
import { authFailurePrefix } from '../keys/redis-keys';
import type { AuthFailureLog } from '../observability/auth-failure-log';
import {
  clientIpKey,
  type LimiterOptions,
  limiterLogger,
  OutageTracker,
  sharedCounterStore,
} from './shared-counter-store';

export interface AuthFailureLimitOptions extends LimiterOptions {
  /** AUTH_FAILURE_LIMIT failed authentications per AUTH_FAILURE_WINDOW_SECONDS, per client IP, fleet-wide. */
  readonly limit: number;
  readonly windowSeconds: number;
  readonly failureLog: AuthFailureLog;
  readonly now?: () => number;
}

export interface AuthFailureLimit {
  /** Whether the request's client IP is blocked: one Map lookup, and not even that while no IP is blocked. */
  isBlocked(req: Request): boolean;
  /** 429 RATE_LIMITED for a blocked IP, decided from memory: nothing verified, nothing asked of Redis. */
  refuse(req: Request, res: Response, next: NextFunction): void;
  /** Counts a failed authentication (the answer is `error`, a 401) and past the limit blocks the IP (429). */
  failed(req: Request, res: Response, next: NextFunction, error: GatewayError): void;
  /** A credential that could not be checked (issuer outage): the 401 `error`, logged in aggregate, not counted. */
  unverified(req: Request, res: Response, next: NextFunction, error: GatewayError): void;
}

/** Blocked addresses are swept of ended blocks once the map holds this many; past it, the oldest is forgotten. */
const MAX_REMEMBERED_BLOCKS = 10_000;

/**
 * The count lives in the shared store (Redis, memory when Redis fails) and is taken only when an authentication has
 * failed, so valid callers cost it nothing. When a failure goes past the limit, this replica remembers the IP as
 * blocked until the window ends; another replica learns it from Redis at its own next failure from that IP.
 * IPv6 addresses count per /56 (express-rate-limit's ipKeyGenerator), so a flood cannot rotate addresses within
 * its own network to escape the count.
 */
export function authFailureLimit(options: AuthFailureLimitOptions): AuthFailureLimit {
  const now = options.now ?? Date.now;
  const { limit, windowSeconds } = options;
  const blockedUntil = new Map<string, number>();

  const block = (key: string, until: number) => {
    if (blockedUntil.size >= MAX_REMEMBERED_BLOCKS) {
      const at = now();
      for (const [address, ends] of blockedUntil) if (ends <= at) blockedUntil.delete(address);
      // Bounded memory: a forgotten block is found again at that address's next failure (the count is still past
      // the limit), at the price of one verification.
      const oldest = blockedUntil.keys().next();
      if (blockedUntil.size >= MAX_REMEMBERED_BLOCKS && !oldest.done) blockedUntil.delete(oldest.value);
    }
    if (!blockedUntil.has(key))
      options.logger.warn(
        { clientIp: key, limit, windowSeconds },
        'client IP blocked after too many failed authentications; its unauthenticated requests get 429',
      );
    blockedUntil.set(key, until);
  };

  const rateLimited = (req: Request, key: string, until: number): GatewayError => {
    options.metrics.rateLimitRejections.inc({ client: 'anonymous', reason: 'auth-failures' });
    options.failureLog.refused(key, req.id);
    return tooManyFailures(limit, windowSeconds, String(secondsToRetry(until - now())));
  };

  const counter = expressRateLimit({
    windowMs: windowSeconds * 1000,
    limit,
    keyGenerator: clientKey,
    // Headers on a 401 would describe the failure budget; the 429 sets its own.
    standardHeaders: false,
    legacyHeaders: false,
    store: sharedCounterStore({
      redis: options.redis,
      prefix: authFailurePrefix(options.keyPrefix, windowSeconds),
      limit,
      outage: new OutageTracker({ ...options, name: 'authentication-failure limiter' }),
    }),
    passOnStoreError: true,
    handler: (req, _res, next) => {
      const key = clientKey(req);
      const resetTime = (req as AugmentedRequest).rateLimit?.resetTime?.getTime();
      const until = resetTime ?? now() + windowSeconds * 1000;
      block(key, until);
      next(rateLimited(req, key, until));
    },
    logger: limiterLogger(options.logger, 'authentication-failure limiter'),
  } satisfies Partial<Options>);

  return {
    isBlocked(req) {
      if (blockedUntil.size === 0) return false;
      const key = clientKey(req);
      const until = blockedUntil.get(key);
      if (until === undefined) return false;
      if (now() < until) return true;
      blockedUntil.delete(key);
      return false;
    },
    refuse(req, res, next) {
      res.locals.quiet = true; // the failure log's line for this IP speaks for it
      const key = clientKey(req);
      next(rateLimited(req, key, blockedUntil.get(key) ?? now() + windowSeconds * 1000));
    },
    failed(req, res, next, error) {
      res.locals.quiet = true;
      options.failureLog.failed(clientKey(req), req.id);
      // Under the limit the limiter calls next() and the answer is the 401; past it, next(429) from its handler.
      void counter(req, res, (refusal?: unknown) => next(refusal ?? error));
    },
    unverified(req, res, next, error) {
      res.locals.quiet = true;
      options.failureLog.unverified(clientKey(req), req.id);
      next(error);
    },
  };
}

/** The 429 of a blocked address, with the reset in seconds. */
function tooManyFailures(limit: number, windowSeconds: number, resetSeconds: string): GatewayError {
  return new GatewayError(
    'RATE_LIMITED',
    `Too many failed authentications from this address; retry after ${resetSeconds} s with a valid credential.`,
    {
      headers: {
        'Retry-After': resetSeconds,
        RateLimit: `limit=${limit}, remaining=0, reset=${resetSeconds}`,
        'RateLimit-Policy': `${limit};w=${windowSeconds}`,
      },
    },
  );
}

/** The request's client key, computed once: a failed request asks for it up to four times (block, log, count, 429). */
const CLIENT_KEY = Symbol('authFailureClientKey');
function clientKey(req: Request): string {
  const keyed = req as Request & { [CLIENT_KEY]?: string };
  keyed[CLIENT_KEY] ??= clientIpKey(req);
  return keyed[CLIENT_KEY];
}
