// Injected upstream misbehaviour, set through the test controls: how the gateway's tests break the provider.
import type { Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { type CallsPerSecond, createCallsPerSecond } from './calls-per-second';
import type { StatsRecorder } from './stats';

export const faultsSchema = z.strictObject({
  /** Delay before every affected request is handled. */
  latencyMs: z.number().int().min(0).max(120_000).default(0),
  /** Share of affected requests answered with `errorStatus` (0..1). */
  errorRate: z.number().min(0).max(1).default(0),
  /**
   * Status of injected answers: a 5xx, 429 for the provider's rate limit, another 4xx the provider may answer, a 2xx
   * the operation does not document (201, 202), or a 3xx redirect (with a Location on another origin).
   */
  errorStatus: z
    .number()
    .int()
    .refine((s) => s >= 201 && s <= 599 && s !== 204 && s !== 205 && s !== 304, {
      error: 'must be a 201-599 status with a body (not 204, 205 or 304)',
    })
    .default(503),
  /** Body of injected answers: the provider's JSON error, or an HTML page (its load balancer's, say). */
  errorBody: z.enum(['json', 'html']).default('json'),
  /** HTTP status of the plan-not-found answer: the seed gives its body, not its status (404 here, 400 as some do). */
  planNotFoundStatus: z.union([z.literal(404), z.literal(400)]).default(404),
  /** Sent as Retry-After on injected errors when set. */
  retryAfterSeconds: z.number().int().min(0).max(86_400).optional(),
  /** Destroy the socket of every affected request without answering (takes precedence over errorRate). */
  resetConnections: z.boolean().default(false),
  /** Send the full Content-Length but only half the body, then close the connection (a failure). */
  truncateBodies: z.boolean().default(false),
  /** Answer with public caching headers (Cache-Control, ETag, Last-Modified, Expires, Age, Vary, Pragma). */
  cachingHeaders: z.boolean().default(false),
  /** Inject failures (error, reset or cut-short body) into at most this many requests, then stop failing. */
  maxFailures: z.number().int().min(1).optional(),
  /**
   * Poison ids: every operation request for one of these document ids or plan ids is answered `errorStatus`,
   * whatever `errorRate` and `maxFailures` say (a provider bug that one particular input triggers).
   */
  failIds: z.array(z.string().max(256)).max(1000).default([]),
  /**
   * The provider's rate limit: operation calls beyond this many in one wall-clock second are answered 429 (with
   * `Retry-After: rateLimitRetryAfterSeconds` when set, else without Retry-After).
   */
  rateLimitPerSecond: z.number().int().min(1).max(1_000_000).optional(),
  rateLimitRetryAfterSeconds: z.number().int().min(0).max(86_400).optional(),
  /** One-shot: the next operation call is answered 429 with `Retry-After: <this>`, then the fault clears itself. */
  next429RetryAfterSeconds: z.number().int().min(0).max(86_400).optional(),
  /** Also affect the two token endpoints; by default only the two operations are. */
  includeTokenEndpoints: z.boolean().default(false),
});

export type FaultsInput = z.input<typeof faultsSchema>;
export type Faults = z.output<typeof faultsSchema>;

export const NO_FAULTS: Faults = faultsSchema.parse({});

/** The document id or plan id an operation request is about (the body is parsed before faults run). */
function requestedId(req: Request): string | undefined {
  const planId = req.params.internalId;
  if (typeof planId === 'string') return planId;
  const id = (req.body as { document?: { id?: unknown } } | undefined)?.document?.id;
  return typeof id === 'string' ? id : undefined;
}

export interface FaultInjector {
  /** Middleware for one kind of endpoint; token endpoints are affected only with includeTokenEndpoints. */
  middleware(kind: 'operation' | 'token'): RequestHandler;
  /** Validates and replaces the current faults (throws a ZodError on bad input). */
  set(input: unknown): Faults;
  current(): Faults;
  /** Operation calls received (and refused 429 by the played rate limit) in each second. */
  callsPerSecond(): ReturnType<CallsPerSecond['list']>;
  clear(): void;
  /** Cancels pending latency timers so nothing keeps the process alive after close(). */
  dispose(): void;
}

/** What a CDN-minded upstream might send: it invites every cache on the way to keep a caller's answer. */
const CACHING_HEADERS: Readonly<Record<string, string>> = {
  'Cache-Control': 'public, max-age=3600',
  ETag: '"simulated-etag"',
  'Last-Modified': 'Wed, 21 Oct 2026 07:28:00 GMT',
  Expires: 'Thu, 01 Jan 2099 00:00:00 GMT',
  Age: '42',
  Vary: 'Accept-Encoding',
  Pragma: 'public',
};

/** The answer's Content-Length stays that of the full body; half the body is sent, then the connection closes. */
function cutBodyShort(res: Response): void {
  res.end = ((chunk?: unknown) => {
    const body = Buffer.isBuffer(chunk) ? chunk : Buffer.from(typeof chunk === 'string' ? chunk : '');
    res.write(body.subarray(0, Math.floor(body.length / 2)), () => res.socket?.destroy());
    return res;
  }) as Response['end'];
}

export function createFaultInjector(
  stats: StatsRecorder,
  random: () => number = Math.random,
  now: () => number = Date.now,
): FaultInjector {
  let faults = NO_FAULTS;
  const limit: RateLimitState = { perSecond: createCallsPerSecond(now), oneShot429: undefined };
  let poisonIds = new Set<string>();
  let failuresLeft = Number.POSITIVE_INFINITY;
  const timers = new Set<NodeJS.Timeout>();

  function delay(ms: number, then: () => void): void {
    const timer = setTimeout(() => {
      timers.delete(timer);
      then();
    }, ms);
    timer.unref();
    timers.add(timer);
  }

  function takeFailure(): boolean {
    if (failuresLeft <= 0) return false;
    failuresLeft -= 1;
    stats.increment('faultsInjected');
    return true;
  }

  return {
    middleware(kind) {
      return (req, res, next) => {
        // Read once: a fault change mid-request must not mix two settings.
        const f = faults;
        if (kind === 'operation' && playRateLimit(res, f, limit, stats)) return;
        if (kind === 'token' && !f.includeTokenEndpoints) return next();
        const act = () => {
          if (f.cachingHeaders) res.set(CACHING_HEADERS);
          if (kind === 'operation' && poisonIds.size > 0) {
            const id = requestedId(req);
            if (id !== undefined && poisonIds.has(id)) {
              stats.increment('faultsInjected');
              sendError(res, f);
              return;
            }
          }
          if (f.resetConnections && takeFailure()) {
            req.socket.destroy();
            return;
          }
          if (!f.resetConnections && f.errorRate > 0 && random() < f.errorRate && takeFailure()) {
            sendError(res, f);
            return;
          }
          if (f.truncateBodies && takeFailure()) cutBodyShort(res);
          next();
        };
        if (f.latencyMs > 0) delay(f.latencyMs, act);
        else act();
      };
    },
    set(input) {
      faults = faultsSchema.parse(input);
      limit.oneShot429 = faults.next429RetryAfterSeconds;
      poisonIds = new Set(faults.failIds);
      failuresLeft = faults.maxFailures ?? Number.POSITIVE_INFINITY;
      return faults;
    },
    current: () => faults,
    callsPerSecond: () => limit.perSecond.list(),
    clear() {
      faults = NO_FAULTS;
      resetRateLimit(limit);
      poisonIds = new Set();
      failuresLeft = Number.POSITIVE_INFINITY;
    },
    dispose() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}

interface RateLimitState {
  readonly perSecond: CallsPerSecond;
  /** Retry-After of the one-shot 429 still to send. */
  oneShot429: number | undefined;
}

function resetRateLimit(limit: RateLimitState): void {
  limit.perSecond.clear();
  limit.oneShot429 = undefined;
}

/** The provider's own limit, counted as calls arrive (before any latency): true when it answered 429. */
function playRateLimit(res: Response, f: Faults, limit: RateLimitState, stats: StatsRecorder): boolean {
  const calls = limit.perSecond.count();
  let retryAfter: number | undefined;
  if (limit.oneShot429 !== undefined) {
    retryAfter = limit.oneShot429;
    limit.oneShot429 = undefined;
  } else if (f.rateLimitPerSecond !== undefined && calls > f.rateLimitPerSecond)
    retryAfter = f.rateLimitRetryAfterSeconds ?? -1;
  else return false;
  limit.perSecond.rateLimited();
  stats.increment('faultsInjected');
  if (retryAfter >= 0) res.set('Retry-After', String(retryAfter));
  res.status(429).json({
    status: { code: '429', description: 'TOO_MANY_REQUESTS', detail: 'Simulated provider rate limit' },
  });
  return true;
}

function sendError(res: Response, f: Faults): void {
  if (f.retryAfterSeconds !== undefined) res.set('Retry-After', String(f.retryAfterSeconds));
  if (f.errorStatus >= 300 && f.errorStatus <= 399)
    res.set('Location', 'https://moved.provider.example/api/elsewhere');
  res.status(f.errorStatus);
  if (f.errorBody === 'html') {
    res.type('html').send(`<html><body><h1>${f.errorStatus}</h1>Simulated load balancer page</body></html>`);
    return;
  }
  res.json({
    status: { code: String(f.errorStatus), description: 'ERROR', detail: 'Simulated upstream failure' },
  });
}
