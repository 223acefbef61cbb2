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

/**
 * Every label value is bounded: route templates, methods, status codes, client ids from the registry, account ids
 * from the accounts file (SPEC §10). The metrics of what an account owns (token calls, upstream calls, circuits, the
 * socket pool, the back-offs) carry `account`; src/accounts/account-metrics.ts hands each account a view that adds it.
 */
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
    help: 'Calls to the upstream token endpoints, by account, kind (login, refresh) and result.',
    labelNames: ['kind', 'result', 'account'] as const,
    registers,
  });
  // Read when metrics are scraped, never per request: one reading per account, removed with the account.
  const upstreamPools = new Map<string, UpstreamPoolReading>();
  new Gauge({
    name: 'upstream_sockets_in_use',
    help: "Upstream sockets carrying a call right now, by account (at most the account's maxSockets).",
    labelNames: ['account'] as const,
    registers,
    collect() {
      this.reset();
      for (const [account, pool] of upstreamPools) this.set({ account }, pool.socketsInUse());
    },
  });
  new Gauge({
    name: 'upstream_requests_waiting',
    help: 'Calls waiting for a free upstream socket, by account (each for at most UPSTREAM_QUEUE_TIMEOUT_MS).',
    labelNames: ['account'] as const,
    registers,
    collect() {
      this.reset();
      for (const [account, pool] of upstreamPools) this.set({ account }, pool.waiting());
    },
  });
  return {
    registry,
    /** Wires an account's upstream pool gauges to its running pool; returns how to stop (the account closed). */
    watchUpstreamPool(account: string, reading: UpstreamPoolReading): () => void {
      upstreamPools.set(account, reading);
      return () => {
        if (upstreamPools.get(account) === reading) upstreamPools.delete(account);
      };
    },
    /** Exports an account's token call results at 0 from the start: increase() then sees the first refusal. */
    zeroTokenRequests(account: string): void {
      for (const kind of ['login', 'refresh'])
        for (const result of TOKEN_CALL_RESULTS) tokenRequests.inc({ kind, result, account }, 0);
    },
    /** One observation per answered request; it also gives http_requests_total. */
    httpDuration,
    upstreamDuration: new Histogram({
      name: 'upstream_request_duration_seconds',
      help: 'Upstream call latency, in seconds, by account.',
      labelNames: ['route', 'status', 'account'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    tokenRequests,
    tokenSource: new Counter({
      name: 'upstream_token_source_total',
      help: 'Where the access token used for a forwarded call came from (memory, redis, upstream).',
      labelNames: ['source', 'account'] as const,
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
      help: 'Upstream circuit breaker of each account and operation: 0 closed, 1 half-open, 2 open.',
      labelNames: ['operation', 'account'] as const,
      registers,
    }),
    storeHealthy: new Gauge({
      name: 'token_store_healthy',
      help: '1 when the shared token store (Redis) answers, 0 when the replica runs on memory alone.',
      registers,
    }),
    /** Idempotency-Key outcomes (SPEC §13): claims, replays, conflicts (in_use), reuse, unknown outcomes, outages. */
    idempotency: new Counter({
      name: 'idempotency_requests_total',
      help: 'Keyed requests by outcome: claimed, replayed, in_use (409), reused (422), outcome_unknown (504), unavailable (503), invalid (400), and the claim kept or released (store_failed when that write failed).',
      labelNames: ['operation', 'outcome'] as const,
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
    catalogueReloadFailures: new Counter({
      name: 'operations_catalogue_reload_failures_total',
      help: 'Reloads of OPERATIONS_FILE refused (unreadable or invalid); the last good catalogue kept serving.',
      labelNames: ['reason'] as const,
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
    accountsReloadFailures: new Counter({
      name: 'upstream_accounts_reload_failures_total',
      help: 'Reloads of the provider accounts refused (UPSTREAM_ACCOUNTS_FILE invalid, an account that would not start); the last good set kept serving.',
      labelNames: ['reason'] as const,
      registers,
    }),
    accountsStaleSince: new Gauge({
      name: 'upstream_accounts_stale_since_seconds',
      help: 'Unix time since which the provider accounts in use no longer match UPSTREAM_ACCOUNTS_FILE; 0 when they do.',
      registers,
    }),
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

/**
 * upstream_token_backoff_seconds{kind,account}: computed at scrape time, since it falls with every passing second.
 * Each account's token manager says where to read its back-off (through its account view); a closed account's
 * reader is dropped.
 */
function backoffGauge(registers: Registry[]) {
  const readers = new Map<string, BackoffReader>();
  new Gauge({
    name: 'upstream_token_backoff_seconds',
    help: 'Seconds before the token endpoints may be called again, by account: after a refused login (refusal) or a transient failure (transient).',
    labelNames: ['kind', 'account'] as const,
    registers,
    collect() {
      this.reset();
      for (const [account, read] of readers) {
        const left = read();
        this.set({ kind: 'refusal', account }, left.refusal / 1000);
        this.set({ kind: 'transient', account }, left.transient / 1000);
      }
    },
  });
  return {
    /** A token manager without an account view (tests of the manager alone) reads as the `default` account. */
    readFrom(reader: BackoffReader): void {
      readers.set('default', reader);
    },
    /** The account's token manager tells the gauge where to read its back-off; returns how to stop. */
    readFromAccount(account: string, reader: BackoffReader): () => void {
      readers.set(account, reader);
      return () => {
        if (readers.get(account) === reader) readers.delete(account);
      };
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
 * upstream_access_token_remaining_seconds{account}: seconds left on each account's access token this replica holds,
 * read from the token managers when metrics are scraped (nothing on the request path); 0 when it holds none or it
 * has expired. One gauge per registry; each call adds (or replaces) an account's reading and returns how to drop it.
 */
export function registerAccessTokenTimeLeft(
  metrics: Metrics,
  accessExpiresAt: () => number | undefined,
  now: () => number = Date.now,
  account = 'default',
): () => void {
  let readings = tokenTimeLeftReadings.get(metrics.registry);
  if (!readings) {
    const perAccount = new Map<string, () => number | undefined>();
    readings = perAccount;
    tokenTimeLeftReadings.set(metrics.registry, perAccount);
    new Gauge({
      name: 'upstream_access_token_remaining_seconds',
      help: 'Seconds left before the upstream access token held by this replica expires, by account (0 when none is held).',
      labelNames: ['account'] as const,
      registers: [metrics.registry],
      collect() {
        this.reset();
        for (const [name, expiresAtOf] of perAccount) {
          const expiresAt = expiresAtOf();
          this.set({ account: name }, expiresAt === undefined ? 0 : Math.max(0, (expiresAt - now()) / 1000));
        }
      },
    });
  }
  const owned = readings;
  owned.set(account, accessExpiresAt);
  return () => {
    if (owned.get(account) === accessExpiresAt) owned.delete(account);
  };
}

/** The per-account readings of each registry's access-token gauge (a registry holds one gauge of a name). */
const tokenTimeLeftReadings = new WeakMap<Registry, Map<string, () => number | undefined>>();

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
