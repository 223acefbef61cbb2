// One log line and one set of metrics per answered request, taken when the answer is finished.
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { Metrics } from './metrics';

/**
 * `res.locals.route` names the route (a template, never the raw path) so metric labels stay bounded.
 * Probes and metrics scrapes are counted but not logged, to keep the log about traffic.
 */
export function requestLog(logger: Logger, metrics: Metrics): RequestHandler {
  return (req, res, next) => {
    const startedAt = performance.now();
    req.log = logger;
    res.once('close', () => {
      const seconds = (performance.now() - startedAt) / 1000;
      const route: string = res.locals.route ?? 'unmatched';
      const status = res.writableFinished ? res.statusCode : 499;
      const client = req.caller?.id ?? 'anonymous';
      const labels = { route, method: req.method, status: String(status), client };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, seconds);
      if (res.locals.quiet) return;
      logger.info(
        {
          requestId: req.id,
          client,
          route,
          method: req.method,
          status,
          latencyMs: Math.round(seconds * 10_000) / 10,
          tokenSource: res.locals.tokenSource,
          coalesced: res.locals.coalesced,
          cache: res.locals.cache,
          document: res.locals.document,
        },
        'request',
      );
    });
    next();
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
