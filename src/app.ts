// The composition root of the HTTP pipeline: every middleware in one visible order, from explicit dependencies.
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import type { Logger } from 'pino';
import type { CallerGuards } from './callers/caller-guards';
import type { Catalogue, CatalogueSource } from './catalogue';
import type { GatewayConfig } from './config/gateway-config';
import { fixedAnswerHeaders, headersOnEveryAnswer } from './http/answer-head';
import { errorEnvelopeHandler } from './http/error-envelope';
import { rememberClientIp, requestContext } from './http/request-context';
import { methodNotAllowed, notFound } from './http/unmatched';
import type { Idempotency } from './idempotency';
import type { DocumentReference } from './observability/document-reference';
import { type Metrics, metricsEndpoint } from './observability/metrics';
import { routeName } from './observability/request-log';
import { NO_TRACING, type Tracing } from './observability/tracing';
import type { Readiness } from './operations/readiness';
import { catalogueRoutes } from './routes/catalogue-routes';

export interface AppDeps {
  readonly config: GatewayConfig;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly guards: CallerGuards;
  readonly readiness: Readiness;
  /** How the request log names a validated document (never by its id). */
  readonly documentReference: DocumentReference;
  /** Idempotency-Key (SPEC §13) for the operations that declare it; absent: the header is ignored. */
  readonly idempotency?: Idempotency;
  /** The operations catalogue (SPEC §12): its routes and /openapi.json follow each reload. */
  readonly catalogue: Pick<CatalogueSource, 'current' | 'onChange'>;
  /** /openapi.json for a catalogue. */
  readonly openApiDocument: (catalogue: Catalogue) => object;
  /** Serve /metrics on this app (false when METRICS_PORT gives it a server of its own). */
  readonly serveMetrics: boolean;
  /** Spans of the request, its caller authentication and its upstream work (NO_TRACING when traces are off). */
  readonly tracing?: Tracing;
  /** Told of every finished request: the usage ledger counts the forwarded operations' outcomes. */
  readonly onFinished?: (req: Request, res: Response) => void;
  /** /bff/* of browser sessions, when they are on. */
  readonly sessionRoutes?: RequestHandler;
  /** Local mode: the small web app at / that shows browser sessions. */
  readonly localWebApp?: RequestHandler;
}

export function createApp(deps: AppDeps): Express {
  const { config, guards, readiness } = deps;
  const tracing = deps.tracing ?? NO_TRACING;
  const authenticate = tracing.around('authenticate', guards.authenticate);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', false);
  app.set('trust proxy', config.server.trustProxy);
  rememberClientIp(app);
  headersOnEveryAnswer(app, fixedAnswerHeaders({ localMode: config.mode === 'local' }));

  const routeDeps = {
    guards,
    authenticate,
    bodyLimitBytes: config.server.bodyLimitBytes,
    documentReference: deps.documentReference,
    idempotency: deps.idempotency,
    planCacheTtlSeconds: config.upstream.planCacheTtlSeconds,
  };
  // Built once per catalogue, never per request: a reload swaps the routers and the document whole.
  const serve = (catalogue: Catalogue) => ({
    routes: catalogueRoutes(catalogue, routeDeps),
    openApiBody: JSON.stringify(deps.openApiDocument(catalogue)),
  });
  let served = serve(deps.catalogue.current());
  deps.catalogue.onChange((catalogue) => {
    served = serve(catalogue);
  });

  app.use(
    requestContext({
      logger: deps.logger,
      metrics: deps.metrics,
      readiness,
      tracing,
      onFinished: deps.onFinished,
    }),
  );
  if (config.server.inboundAllowCidrs.length > 0) app.use(guards.inboundAllowList);
  app.use(guards.cors);

  // The catalogue's operations first: the router tries routes in order, and they carry nearly all the traffic. The
  // routers are those of the catalogue in force, read once per request: a reload swaps them whole.
  app.use((req, res, next) => served.routes.operations(req, res, next));
  if (deps.sessionRoutes) {
    // Logins and logout tokens arrive without a credential: limited per client address like any anonymous call.
    app.use('/bff', guards.rateLimit);
    app.use(deps.sessionRoutes);
  }
  if (deps.localWebApp) app.use(deps.localWebApp);
  app.use((req, res, next) => served.routes.otherMethods(req, res, next));

  app.get('/healthz', routeName('healthz', { quiet: true }), (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', routeName('readyz', { quiet: true }), (_req, res) => {
    const report = readiness.report();
    res.status(report.status === 'not-ready' ? 503 : 200).json(report);
  });
  if (deps.serveMetrics)
    app.get('/metrics', routeName('metrics', { quiet: true }), metricsEndpoint(deps.metrics));
  app.get('/openapi.json', routeName('openapi'), (_req, res) => {
    res.type('application/json').send(served.openApiBody);
  });
  const probePaths = ['/healthz', '/readyz', '/openapi.json', ...(deps.serveMetrics ? ['/metrics'] : [])];
  app.all(probePaths, routeName('probe', { quiet: true }), methodNotAllowed('GET, HEAD'));

  app.use(notFound());
  app.use(errorEnvelopeHandler());
  return app;
}
