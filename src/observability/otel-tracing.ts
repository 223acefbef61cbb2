// The OpenTelemetry SDK behind Tracing: manual spans, OTLP/HTTP (JSON) export, W3C trace context. Loaded lazily.
import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapSetter,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { TracingSettings } from '../config/gateway-config';
import type { SpanAttributes, Tracing } from './tracing';

/** Methods a span may be named by (OpenTelemetry HTTP conventions); any other is `_OTHER`, so names stay bounded. */
const KNOWN_METHODS = new Set([
  'CONNECT',
  'DELETE',
  'GET',
  'HEAD',
  'OPTIONS',
  'PATCH',
  'POST',
  'PUT',
  'TRACE',
]);

/** The longest a shutdown waits for the last export: a hung collector must not hold the process past its grace period. */
const SHUTDOWN_EXPORT_MS = 3_000;

/**
 * The provider gets the trace's ids, never the caller's `tracestate`: its vendor entries (a tenant, a user) are
 * caller data that the gateway would otherwise hand on under its own credentials.
 */
const TRACEPARENT_ONLY: TextMapSetter<Record<string, unknown>> = {
  set(carrier, key, value) {
    if (key === 'traceparent') defaultTextMapSetter.set(carrier, key, value);
  },
};

/** Probes and scrapes, every few seconds from every kubelet and Prometheus: counted in metrics, not traced. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * No instrumentation library is registered: every span is made here by hand, and no library patches http, so
 * nothing adds a trace header to the provider's calls (or to the token endpoint) behind the gateway's back.
 */
export function createOtelTracing(settings: TracingSettings, version: string, logger: Logger): Tracing {
  const contexts = new AsyncLocalStorageContextManager().enable();
  const propagator = new W3CTraceContextPropagator();
  const provider = tracerProvider(settings, version, logger);
  const spans: Spans = { contexts, tracer: provider.getTracer('payments-bff-gateway', version) };
  return {
    enabled: true,
    serve: (req, res, next) => serveInSpan(spans, propagator, req, res, next),
    around: (name, handler) => aroundInSpan(spans, name, handler),
    inSpan: (name, work, describe, attributes, kind) =>
      workInSpan(
        spans,
        name,
        work,
        describe,
        attributes,
        kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL,
      ),
    // A timer set while a request was served would otherwise make this a child of that long-finished request.
    background: (name, work) => runInSpan(spans, startChild(spans, name, ROOT_CONTEXT), ROOT_CONTEXT, work),
    injectUpstream(headers) {
      if (!settings.propagateUpstream) return;
      propagator.inject(contexts.active(), headers as Record<string, unknown>, TRACEPARENT_ONLY);
    },
    async shutdown() {
      let timer: NodeJS.Timeout | undefined;
      const givenUp = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_EXPORT_MS);
        timer.unref();
      });
      await Promise.race([provider.shutdown().catch(() => undefined), givenUp]);
      clearTimeout(timer);
      contexts.disable();
    },
  };
}

/** The tracer and the context it keeps spans in, shared by the functions below. */
interface Spans {
  readonly contexts: AsyncLocalStorageContextManager;
  readonly tracer: Tracer;
}

function tracerProvider(settings: TracingSettings, version: string, logger: Logger): TracerProvider {
  return new TracerProvider({
    resource: defaultResource()
      .merge(resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': version }))
      // OTEL_RESOURCE_ATTRIBUTES (deployment.environment, k8s names...), as every OpenTelemetry SDK reads it.
      .merge(detectResources({ detectors: [envDetector] })),
    sampler: samplerOf(settings),
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: reportingFailures(new OTLPTraceExporter({ url: settings.tracesUrl }), logger),
        scheduledDelayMillis: settings.exportDelayMs,
      }),
    ],
  });
}

function startChild(
  { tracer }: Spans,
  name: string,
  parent: Context,
  attributes?: SpanAttributes,
  kind = SpanKind.INTERNAL,
): Span {
  return tracer.startSpan(name, { kind, attributes: defined(attributes) }, parent);
}

/** The request's server span (its parent the caller's valid traceparent), ended when the answer is done. */
function serveInSpan(
  spans: Spans,
  propagator: W3CTraceContextPropagator,
  req: Request,
  res: Response,
  next: NextFunction,
): void {
  if (UNTRACED_PATHS.has(pathOf(req.url))) {
    next();
    return;
  }
  const parent = propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
  const method = KNOWN_METHODS.has(req.method) ? req.method : '_OTHER';
  const span = spans.tracer.startSpan(
    method,
    { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } },
    parent,
  );
  res.locals.traceId = span.spanContext().traceId;
  res.once('close', () => endServerSpan(span, req, res, method));
  spans.contexts.with(trace.setSpan(parent, span), next);
}

/** A middleware in a child span: ended when it passes on, or with the answer when it answers by itself. */
function aroundInSpan(spans: Spans, name: string, handler: RequestHandler): RequestHandler {
  return (req, res, next) => {
    const parent = spans.contexts.active();
    const span = startChild(spans, name, parent);
    let ended = false;
    const answered = () => {
      if (ended) return;
      ended = true;
      if (res.statusCode >= 400) failed(span, `http_${res.statusCode}`);
      span.end();
    };
    res.once('close', answered);
    spans.contexts.with(trace.setSpan(parent, span), () =>
      handler(req, res, (error?: unknown) => {
        res.off('close', answered);
        if (!ended) {
          ended = true;
          if (error !== undefined) failed(span, errorType(error));
          span.end();
        }
        // The rest of the pipeline is a sibling of this span, not its child.
        spans.contexts.with(parent, () => next(error as Parameters<typeof next>[0]));
      }),
    );
  };
}

function workInSpan<T>(
  spans: Spans,
  name: string,
  work: () => Promise<T>,
  describe: ((result: T) => SpanAttributes) | undefined,
  attributes: SpanAttributes | undefined,
  kind: SpanKind,
): Promise<T> {
  const parent = spans.contexts.active();
  // Work no request or background task asked for (a readiness probe's token retry) starts no lone trace.
  if (!trace.getSpan(parent)) return work();
  const span = startChild(spans, name, parent, attributes, kind);
  return runInSpan(spans, span, parent, work, (result) => {
    const outcome = describe?.(result);
    if (!outcome) return;
    span.setAttributes(defined(outcome));
    const status = outcome['http.response.status_code'];
    // Client spans: every 4xx and 5xx is an error (OpenTelemetry HTTP conventions).
    if (typeof status === 'number' && status >= 400) failed(span, String(status));
  });
}

/** `work` with `span` current, the span ended with its outcome (a failure named by its kind). */
function runInSpan<T>(
  spans: Spans,
  span: Span,
  parent: Context,
  work: () => Promise<T>,
  onResult?: (result: T) => void,
): Promise<T> {
  return spans.contexts.with(trace.setSpan(parent, span), work).then(
    (result) => {
      onResult?.(result);
      span.end();
      return result;
    },
    (error: unknown) => {
      failed(span, errorType(error));
      span.end();
      throw error;
    },
  );
}

/**
 * Logs once when exports start failing (a wrong endpoint, a collector down) and once when they work again, naming
 * the failure by its code or HTTP status only: the endpoint's URL, headers (a vendor's API key) and answer never.
 */
function reportingFailures(exporter: SpanExporter, logger: Logger): SpanExporter {
  let failing = false;
  return {
    export(spans, done) {
      exporter.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS && !failing) {
          failing = true;
          // An OTLPExporterError's numeric code is the collector's HTTP status (401: the API key; 404: the path).
          const { code, name } = (result.error ?? {}) as { code?: unknown; name?: unknown };
          logger.warn(
            {
              event: 'trace.export_failed',
              error: typeof code === 'string' ? code : name,
              status: typeof code === 'number' ? code : undefined,
            },
            'trace export to the OTLP endpoint failed: spans are dropped until it answers',
          );
        } else if (result.code === ExportResultCode.SUCCESS && failing) {
          failing = false;
          logger.info({ event: 'trace.export_recovered' }, 'trace export to the OTLP endpoint works again');
        }
        done(result);
      });
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

/** The path of a request target, without its query string (a probe may carry one). */
function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/**
 * The HTTP server span's name and status (OpenTelemetry conventions): the route template, 5xx is an error; and, as
 * the request line says, whether a plan read shared another request's upstream call or came from the cache (such a
 * request has no token or upstream span of its own).
 */
function endServerSpan(span: Span, req: Request, res: Response, method: string): void {
  const status = res.writableFinished ? res.statusCode : 499;
  // The matched route's template (`/api/subscriptions/plan/:planId`), never the raw path and its ids.
  const template: unknown = req.route?.path;
  if (typeof template === 'string') {
    span.updateName(`${method} ${template}`);
    span.setAttribute('http.route', template);
  }
  span.setAttribute('http.response.status_code', status);
  if (req.caller) span.setAttribute('gateway.client', req.caller.id);
  const { coalesced, cache, account } = res.locals;
  if (account !== undefined) span.setAttribute('gateway.account', account);
  if (typeof coalesced === 'boolean') span.setAttribute('gateway.coalesced', coalesced);
  if (typeof cache === 'string') span.setAttribute('gateway.cache', cache);
  if (status >= 500) failed(span, String(status));
  span.end();
}

function failed(span: Span, type: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.setAttribute('error.type', type);
}

/** A failure named by its kind (a GatewayError reason, an upstream failure kind, a class name), never its message. */
function errorType(error: unknown): string {
  if (typeof error !== 'object' || error === null) return 'error';
  const { reason, kind, name } = error as { reason?: unknown; kind?: unknown; name?: unknown };
  if (typeof reason === 'string') return reason;
  if (typeof kind === 'string') return `upstream_${kind}`;
  return typeof name === 'string' ? name : 'error';
}

function defined(attributes: SpanAttributes | undefined): Record<string, string | number | boolean> {
  const kept: Record<string, string | number | boolean> = {};
  if (attributes)
    for (const [key, value] of Object.entries(attributes)) if (value !== undefined) kept[key] = value;
  return kept;
}

/**
 * OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, with the SDKs' meanings, but for `traceidratio` under a caller's
 * trace: the trace id is the caller's choice (one whose hash is tiny passes any ratio), so the gateway draws by
 * itself there; the spans under the request's follow its decision, so a trace is kept or dropped whole.
 */
export function samplerOf(settings: TracingSettings): Sampler {
  const ratio = new TraceIdRatioBasedSampler(settings.samplerRatio);
  switch (settings.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio': {
      const drawn = drawnRatio(settings.samplerRatio);
      return new ParentBasedSampler({
        root: ratio,
        remoteParentSampled: drawn,
        remoteParentNotSampled: drawn,
      });
    }
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** Keeps `ratio` of the spans by a draw of its own: nothing the caller sends can steer it. */
function drawnRatio(ratio: number): Sampler {
  return {
    shouldSample: () => ({
      decision: Math.random() < ratio ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD,
    }),
    toString: () => `DrawnRatio{${ratio}}`,
  };
}
