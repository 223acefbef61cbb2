// One load run with autocannon (in this process), with exact latency percentiles from every response's duration.
import autocannon from 'autocannon';

export interface LoadSpec {
  readonly url: string;
  readonly method: 'GET' | 'POST';
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly durationSeconds: number;
  readonly connections: number;
  /** Open-loop rate for the whole run (req/s); closed loop at full speed when absent. */
  readonly overallRate?: number;
  /** A fresh path for every request (the url's path is used when absent). */
  readonly pathFor?: () => string;
  /** The status that counts as success; any 2xx when absent. */
  readonly expectStatus?: number;
}

export interface LoadResult {
  /** Responses per second over the run. */
  readonly rps: number;
  /**
   * Percentiles of every request's wait: the answered ones, and those still unanswered when the run stopped, at what
   * they had waited by then (at least that). A target that leaves callers waiting the whole run is not read by the
   * answers it gave the others (a busy Node server accepts one connection per event-loop turn: bench/README.md).
   */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** p99 of the answered requests alone (how this bench read p99 before 2026-11-27, seventh). */
  readonly p99AnsweredMs: number;
  /** Requests still unanswered when the run stopped that had waited more than a second by then. */
  readonly waitingOverSecond: number;
  /** Socket errors, timeouts and unexpected statuses (non-2xx unless the spec expects another). */
  readonly errors: number;
  /** Every response (2xx or not). */
  readonly responses: number;
  /** 503 answers (saturation or an open circuit), counted among `errors` too. */
  readonly status503: number;
  readonly seconds: number;
}

export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    // autocannon's histograms have 1 ms resolution; record every duration (float ms) to get exact percentiles.
    const durations: number[] = [];
    // Each connection's request in flight (pipelining 1: at most one), since when: what is left at the end was cut.
    const inFlightSince = new Map<autocannon.Client, number>();
    let failed = 0;
    let status503 = 0;
    const startedAt = performance.now();
    const instance = autocannon(
      {
        url: spec.url,
        method: spec.method,
        headers: spec.headers,
        body: spec.body,
        connections: spec.connections,
        pipelining: 1,
        duration: spec.durationSeconds,
        overallRate: spec.overallRate,
        timeout: 10,
        setupClient: (client) => {
          // 'request' (a request written) is an event of autocannon's client its typings leave out.
          const events: NodeJS.EventEmitter = client;
          events.on('request', () => inFlightSince.set(client, performance.now()));
          events.on('response', () => inFlightSince.delete(client));
        },
        requests: spec.pathFor
          ? [{ setupRequest: (request) => ({ ...request, path: (spec.pathFor as () => string)() }) }]
          : undefined,
      },
      (error, result) => {
        if (error) {
          reject(error);
          return;
        }
        const endedAt = performance.now();
        const seconds = (endedAt - startedAt) / 1000;
        const cut = [...inFlightSince.values()].map((since) => endedAt - since);
        durations.sort((a, b) => a - b);
        const waits = [...durations, ...cut].sort((a, b) => a - b);
        resolve({
          rps: durations.length / seconds,
          p50Ms: percentile(waits, 0.5),
          p99Ms: percentile(waits, 0.99),
          p99AnsweredMs: percentile(durations, 0.99),
          waitingOverSecond: cut.filter((ms) => ms > 1_000).length,
          errors: result.errors + failed, // autocannon counts timeouts among errors
          responses: durations.length,
          status503,
          seconds,
        });
      },
    );
    instance.on('response', (_client, statusCode: number, _bytes: number, responseTime: number) => {
      durations.push(responseTime);
      const ok = spec.expectStatus
        ? statusCode === spec.expectStatus
        : statusCode >= 200 && statusCode <= 299;
      if (!ok) failed += 1;
      if (statusCode === 503) status503 += 1;
    });
  });
}

/** Nearest-rank percentile of sorted values; NaN when empty. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

export function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = Math.floor(finite.length / 2);
  return finite.length % 2
    ? (finite[mid] as number)
    : ((finite[mid - 1] as number) + (finite[mid] as number)) / 2;
}
