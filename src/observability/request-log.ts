// One log line and one latency observation (which also counts it) per answered request, taken when the answer is finished.
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { REDACTED_PATHS } from './logger';
import type { Metrics } from './metrics';

/**
 * The request line is built here from known fields only (ids, client IP, route, status, timings, a document's keyed reference), none
 * of which the redaction list names. Its safety net is the list's top-level names: path-wildcard redaction
 * costs more than the rest of the line together (bench/README.md) and would never match here.
 */
const REQUEST_LINE_REDACTED = [
  ...REDACTED_PATHS.filter((path) => /^[A-Za-z]+$/.test(path)),
  'headers',
  'cookie',
  'err',
  'config',
];

/**
 * Call once per request, first thing (requestContext does): logs and counts the answer when it is finished.
 * `res.locals.route` names the route (a template, never the raw path) so metric labels stay bounded.
 * Probes and metrics scrapes are counted but not logged, to keep the log about traffic.
 */
export function requestObserver(
  logger: Logger,
  metrics: Metrics,
  /** Told of every finished request after it is counted (the usage ledger), logged or not. */
  onFinished?: (req: Request, res: Response) => void,
): (req: Request, res: Response) => void {
  const lines = logger.child({}, { redact: { paths: REQUEST_LINE_REDACTED, censor: '[redacted]' } });
  return (req, res) => {
    const startedAt = performance.now();
    // The caller's address for the log line (worked out once per request: rememberClientIp).
    const clientIp = req.ip;
    req.log = logger;
    // 'close' is emitted once per response: `on` spares the wrapper `once` would allocate per request.
    res.on('close', () => {
      const seconds = (performance.now() - startedAt) / 1000;
      const route: string = res.locals.route ?? 'unmatched';
      const status = res.writableFinished ? res.statusCode : 499;
      const client = req.caller?.id ?? 'anonymous';
      const labels = { route, method: req.method, status: String(status), client };
      metrics.httpDuration.observe(labels, seconds);
      onFinished?.(req, res);
      if (res.locals.quiet) return;
      lines.info(
        {
          requestId: req.id,
          traceId: res.locals.traceId,
          client,
          user: req.caller?.user,
          account: res.locals.account,
          clientIp,
          route,
          method: req.method,
          status,
          latencyMs: Math.round(seconds * 10_000) / 10,
          upstreamMs: res.locals.upstreamMs,
          tokenSource: res.locals.tokenSource,
          coalesced: res.locals.coalesced,
          cache: res.locals.cache,
          replayed: res.locals.replayed,
          document: res.locals.document,
          billable: res.locals.billable,
          budget: res.locals.budget,
          priority: res.locals.priority,
          quotaPeriod: res.locals.quotaPeriod,
        },
        'request',
      );
    });
  };
}

/** Tags the route for logs and metrics. */
export function routeName(name: string, options: { quiet?: boolean } = {}): RequestHandler {
  return (_req, res, next) => {
    res.locals.route = name;
    if (options.quiet) res.locals.quiet = true;
    next();
  };
}
