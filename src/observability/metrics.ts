// Prometheus metrics of the gateway (prom-client), on a registry of its own so tests and replicas never share one.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Every label value is bounded: route templates, methods, status codes, client ids from the registry. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from request to answer, in seconds.',
    labelNames: ['route', 'method', 'status', 'client'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  registerAnsweredRequestsCounter(httpDuration, registers);
  return {
    registry,
    /** One observation per answered request; it also gives http_requests_total. */
    httpDuration,
    upstreamDuration: new Histogram({
      name: 'upstream_request_duration_seconds',
      help: 'Upstream call latency, in seconds.',
      labelNames: ['route', 'status'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    tokenRequests: new Counter({
      name: 'upstream_token_requests_total',
      help: 'Calls to the upstream token endpoints, by kind (login, refresh) and result.',
      labelNames: ['kind', 'result'] as const,
      registers,
    }),
    tokenSource: new Counter({
      name: 'upstream_token_source_total',
      help: 'Where the access token used for a forwarded call came from (memory, redis, upstream).',
      labelNames: ['source'] as const,
      registers,
    }),
    rateLimitRejections: new Counter({
      name: 'rate_limit_rejections_total',
      help: 'Requests refused 429: client-limit (a client over its limit), auth-failures (an IP blocked for failed authentications).',
      labelNames: ['client', 'reason'] as const,
      registers,
    }),
    rateLimitFallbacks: new Counter({
      name: 'rate_limit_store_fallbacks_total',
      help: 'Rate-limit decisions taken from replica memory because Redis was unreachable.',
      registers,
    }),
    circuitState: new Gauge({
      name: 'upstream_circuit_state',
      help: 'Upstream circuit breaker: 0 closed, 1 half-open, 2 open.',
      registers,
    }),
    storeHealthy: new Gauge({
      name: 'token_store_healthy',
      help: '1 when the shared token store (Redis) answers, 0 when the replica runs on memory alone.',
      registers,
    }),
    storeErrors: new Counter({
      name: 'token_store_errors_total',
      help: 'Failed token store operations (each fell back to memory or the token endpoint).',
      labelNames: ['operation'] as const,
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * http_requests_total: every answered request is one observation of the latency histogram with the same labels, so
 * the counter is the histogram's `_count`, copied when metrics are scraped instead of counted a second time on every
 * request.
 */
function registerAnsweredRequestsCounter(
  duration: Histogram<'route' | 'method' | 'status' | 'client'>,
  registers: Registry[],
): void {
  new Counter({
    name: 'http_requests_total',
    help: 'Requests answered by the gateway.',
    labelNames: ['route', 'method', 'status', 'client'] as const,
    registers,
    async collect() {
      const { values } = await duration.get();
      this.reset();
      for (const { metricName, labels, value } of values)
        if (metricName === 'http_request_duration_seconds_count') this.inc(labels, value);
    },
  });
}

/** GET /metrics, for the main app or the METRICS_PORT server: the Prometheus text format. */
export function metricsEndpoint(metrics: Metrics) {
  return (_req: IncomingMessage, res: ServerResponse): void => {
    metrics.registry.metrics().then(
      (text) => {
        res.setHeader('content-type', metrics.registry.contentType);
        res.end(text);
      },
      () => {
        res.statusCode = 500;
        res.end();
      },
    );
  };
}
