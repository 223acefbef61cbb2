// Prometheus metrics of the gateway (prom-client), on a registry of its own so tests and replicas never share one.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { createBudgetMetrics } from './budget-metrics';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Results of a token call the alert rules watch (resultOf in token-endpoint.ts: the lower-cased failure reason). */
const TOKEN_CALL_RESULTS = [
  'success',
  'upstream_auth_failed',
  'upstream_ip_not_whitelisted',
  'upstream_unavailable',
  'upstream_timeout',
];

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
  const tokenRequests = new Counter({
    name: 'upstream_token_requests_total',
    help: 'Calls to the upstream token endpoints, by kind (login, refresh) and result.',
    labelNames: ['kind', 'result'] as const,
    registers,
  });
  // Exported at 0 from the start: increase() then sees the first refusal, which a series born at 1 would hide.
  for (const kind of ['login', 'refresh'])
    for (const result of TOKEN_CALL_RESULTS) tokenRequests.inc({ kind, result }, 0);
  // Read when metrics are scraped, never per request; zero until the upstream pool is wired (local mode starts late).
  const upstreamPool: UpstreamPoolReading = { socketsInUse: () => 0, waiting: () => 0 };
  new Gauge({
    name: 'upstream_sockets_in_use',
    help: 'Upstream sockets carrying a call right now (at most UPSTREAM_MAX_SOCKETS).',
    registers,
    collect() {
      this.set(upstreamPool.socketsInUse());
    },
  });
  new Gauge({
    name: 'upstream_requests_waiting',
    help: 'Calls waiting for a free upstream socket (each for at most UPSTREAM_QUEUE_TIMEOUT_MS).',
    registers,
    collect() {
      this.set(upstreamPool.waiting());
    },
  });
  return {
    registry,
    /** Wires the upstream pool gauges to the running pool. */
    watchUpstreamPool(reading: UpstreamPoolReading): void {
      upstreamPool.socketsInUse = reading.socketsInUse;
      upstreamPool.waiting = reading.waiting;
    },
    /** One observation per answered request; it also gives http_requests_total. */
    httpDuration,
    upstreamDuration: new Histogram({
      name: 'upstream_request_duration_seconds',
      help: 'Upstream call latency, in seconds.',
      labelNames: ['route', 'status'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    tokenRequests,
    tokenSource: new Counter({
      name: 'upstream_token_source_total',
      help: 'Where the access token used for a forwarded call came from (memory, redis, upstream).',
      labelNames: ['source'] as const,
      registers,
    }),
    rateLimitRejections: new Counter({
      name: 'rate_limit_rejections_total',
      help: 'Requests refused 429: client-limit (a client over its limit), user-limit (a browser-session user over its own limit), auth-failures (an IP blocked for failed authentications).',
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
      help: 'Upstream circuit breaker of each operation: 0 closed, 1 half-open, 2 open.',
      labelNames: ['operation'] as const,
      registers,
    }),
    storeHealthy: new Gauge({
      name: 'token_store_healthy',
      help: '1 when the shared token store (Redis) answers, 0 when the replica runs on memory alone.',
      registers,
    }),
    storeRecordsRejected: new Counter({
      name: 'store_records_rejected_total',
      help: 'Records read from Redis that did not open or parse (tampered, forged, another key) and were ignored.',
      labelNames: ['kind'] as const,
      registers,
    }),
    tokenBackoff: backoffGauge(registers),
    storeErrors: new Counter({
      name: 'token_store_errors_total',
      help: 'Failed token store operations (each fell back to memory or the token endpoint).',
      labelNames: ['operation'] as const,
      registers,
    }),
    registryReloadFailures: new Counter({
      name: 'client_registry_reload_failures_total',
      help: 'Client registry reloads refused (file unreadable or invalid); the last good registry kept serving.',
      labelNames: ['reason'] as const,
      registers,
    }),
    /** The provider budgets of the accounts (SPEC §11). */
    budget: createBudgetMetrics(registers),
    registryStaleSince: new Gauge({
      name: 'client_registry_stale_since_seconds',
      help: 'Unix time since which the client registry in use no longer matches CLIENTS_FILE; 0 when it does.',
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Milliseconds left of each token-endpoint back-off, read when metrics are scraped. */
export type BackoffReader = () => { refusal: number; transient: number };

/** upstream_token_backoff_seconds{kind}: computed at scrape time, since it falls with every passing second. */
function backoffGauge(registers: Registry[]) {
  let read: BackoffReader = () => ({ refusal: 0, transient: 0 });
  new Gauge({
    name: 'upstream_token_backoff_seconds',
    help: 'Seconds before the token endpoints may be called again: after a refused login (refusal) or a transient failure (transient).',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      const left = read();
      this.set({ kind: 'refusal' }, left.refusal / 1000);
      this.set({ kind: 'transient' }, left.transient / 1000);
    },
  });
  return {
    /** The token manager tells the gauge where to read its back-off. */
    readFrom(reader: BackoffReader): void {
      read = reader;
    },
  };
}

export interface UpstreamPoolReading {
  socketsInUse: () => number;
  waiting: () => number;
}

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

/**
 * upstream_access_token_remaining_seconds: seconds left on the access token this replica holds, read from the token
 * manager when metrics are scraped (nothing on the request path); 0 when it holds none or it has expired.
 */
export function registerAccessTokenTimeLeft(
  metrics: Metrics,
  accessExpiresAt: () => number | undefined,
  now: () => number = Date.now,
): void {
  new Gauge({
    name: 'upstream_access_token_remaining_seconds',
    help: 'Seconds left before the upstream access token held by this replica expires (0 when none is held).',
    registers: [metrics.registry],
    collect() {
      const expiresAt = accessExpiresAt();
      this.set(expiresAt === undefined ? 0 : Math.max(0, (expiresAt - now()) / 1000));
    },
  });
}

/** GET /metrics, for the main app or the METRICS_PORT server: the Prometheus text format. */
export function metricsEndpoint(metrics: Metrics) {
  return (_req: IncomingMessage, res: ServerResponse): void => {
    metrics.registry.metrics().then(
      (text) => {
        res.setHeader('content-type', metrics.registry.contentType);
        // Also on the METRICS_PORT listener, which has no request context: a scrape is never served stale.
        res.setHeader('cache-control', 'no-store');
        res.end(text);
      },
      () => {
        res.statusCode = 500;
        res.end();
      },
    );
  };
}
