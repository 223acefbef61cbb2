// A bounded steady-load driver for the resilience tests: N loops send requests for a fixed time (and at most a
// fixed count); every request sent and every answer received is counted, by status, with the max latency.
// An answer is well-formed when it has a status, an X-Request-Id and a JSON body (an error: the gateway's error envelope).
import { Agent, request as httpRequest } from 'node:http';

export interface LoadRequest {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

export interface LoadOptions {
  /** Base URLs (http://127.0.0.1:port); loop i sends to targets[i % targets.length]. */
  readonly targets: readonly string[];
  /** Concurrent loops (each waits for its answer before sending the next request). */
  readonly concurrency: number;
  /** How long the loops keep sending. */
  readonly durationMs: number;
  /** Hard bound on requests over all loops (default 50 000). */
  readonly maxRequests?: number;
  /** The n-th request (n counts from 0 over all loops). */
  readonly request: (n: number) => LoadRequest;
  /** Pause of a loop between two requests (default 10 ms): steady, not flat-out, load. */
  readonly pauseMs?: number;
  /** An answer slower than this counts as hung (lost) and its socket is destroyed (default 15 s). */
  readonly timeoutMs?: number;
  /** Reuse connections (default true); false opens a fresh connection for every request. */
  readonly keepAlive?: boolean;
  /** Keep one Outcome per request in the report (default false). */
  readonly recordOutcomes?: boolean;
  /** Stop early when this resolves (e.g. a phase of a fault ended). */
  readonly stop?: Promise<unknown>;
  /** Sees every answer (e.g. to check Retry-After on 503s or the reason of each error). */
  readonly onAnswer?: (answer: Answer & { latencyMs: number; request: LoadRequest }) => void;
}

export interface Outcome {
  readonly target: string;
  /** ms since the run started. */
  readonly startedAt: number;
  /** When the TCP connection of this request was established (a reused socket: when it was first opened). */
  readonly connectedAt?: number;
  readonly endedAt: number;
  readonly status?: number;
  /** Network error code when no answer came (ECONNREFUSED, ECONNRESET, TIMEOUT...). */
  readonly error?: string;
}

export interface LoadReport {
  readonly sent: number;
  /** Answers with a status line (well-formed or not). */
  readonly answered: number;
  readonly byStatus: Record<string, number>;
  /** Requests whose connection was refused (nothing was accepted: not a lost answer). */
  readonly refused: number;
  /** Requests sent without an answer (reset after connect, hung): must be 0 for "nothing lost". */
  readonly lost: number;
  readonly errors: Record<string, number>;
  /** Answers without a JSON body, an X-Request-Id, or (errors) the gateway's error envelope. */
  readonly malformed: number;
  readonly malformedSamples: string[];
  readonly maxLatencyMs: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly durationMs: number;
  /** Distinct answer bodies and header blocks (capped), for the leak scan. */
  readonly texts: string[];
  readonly outcomes: Outcome[];
  /** `byStatus` as `200×123 502×4`. */
  readonly summary: string;
}

const CONNECT_FAILURES = new Set(['ECONNREFUSED']);
const MAX_TEXTS = 2_000;

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** Runs the loops until durationMs (or maxRequests, or `stop`) and reports every request. */
export async function runLoad(options: LoadOptions): Promise<LoadReport> {
  const keepAlive = options.keepAlive ?? true;
  const agent = new Agent({ keepAlive, maxSockets: options.concurrency, keepAliveMsecs: 1_000 });
  const maxRequests = options.maxRequests ?? 50_000;
  const pauseMs = options.pauseMs ?? 10;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const t0 = performance.now();
  const now = () => performance.now() - t0;
  let stopped = false;
  void options.stop?.then(() => {
    stopped = true;
  });

  let sent = 0;
  let answered = 0;
  let refused = 0;
  let lost = 0;
  let malformed = 0;
  const malformedSamples: string[] = [];
  const byStatus: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const latencies: number[] = [];
  const texts = new Set<string>();
  const outcomes: Outcome[] = [];
  const connectedAt = new WeakMap<object, number>();

  const once = (target: string, spec: LoadRequest): Promise<void> =>
    new Promise((resolve) => {
      const startedAt = now();
      const url = new URL(spec.path, target);
      const headers: Record<string, string> = { ...spec.headers };
      if (spec.body !== undefined) headers['content-length'] = String(Buffer.byteLength(spec.body));
      let socketRef: object | undefined;
      let done = false;
      const finish = (result: { answer?: Answer; error?: string }) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        const endedAt = now();
        const connected = socketRef ? connectedAt.get(socketRef) : undefined;
        if (result.answer) {
          const { status } = result.answer;
          answered += 1;
          byStatus[status] = (byStatus[status] ?? 0) + 1;
          latencies.push(endedAt - startedAt);
          options.onAnswer?.({ ...result.answer, latencyMs: endedAt - startedAt, request: spec });
          const problem = malformation(result.answer);
          if (problem) {
            malformed += 1;
            if (malformedSamples.length < 5)
              malformedSamples.push(`${status} ${problem}: ${result.answer.body.slice(0, 200)}`);
          }
          if (texts.size < MAX_TEXTS) {
            texts.add(result.answer.body);
            texts.add(headerBlock(result.answer.headers));
          }
        } else {
          const code = result.error ?? 'unknown';
          errors[code] = (errors[code] ?? 0) + 1;
          if (CONNECT_FAILURES.has(code)) refused += 1;
          else lost += 1;
        }
        if (options.recordOutcomes)
          outcomes.push({
            target,
            startedAt,
            connectedAt: connected,
            endedAt,
            status: result.answer?.status,
            error: result.answer ? undefined : (result.error ?? 'unknown'),
          });
        resolve();
      };
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname + url.search,
          method: spec.method,
          headers,
          agent,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            finish({
              answer: {
                status: res.statusCode ?? 0,
                headers: res.headers,
                body: Buffer.concat(chunks).toString('utf8'),
              },
            }),
          );
          res.on('error', (e: NodeJS.ErrnoException) => finish({ error: e.code ?? 'RESPONSE_ERROR' }));
          res.on('aborted', () => finish({ error: 'ABORTED' }));
        },
      );
      req.on('socket', (socket) => {
        socketRef = socket;
        if (!connectedAt.has(socket)) {
          if (socket.connecting) socket.once('connect', () => connectedAt.set(socket, now()));
          else connectedAt.set(socket, now());
        }
      });
      req.on('error', (e: NodeJS.ErrnoException) => finish({ error: e.code ?? e.message }));
      const timer = setTimeout(() => {
        req.destroy();
        finish({ error: 'TIMEOUT' });
      }, timeoutMs);
      sent += 1;
      req.end(spec.body);
    });

  const loop = async (i: number) => {
    const target = options.targets[i % options.targets.length] as string;
    while (!stopped && now() < options.durationMs && sent < maxRequests) {
      await once(target, options.request(sent));
      if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, i) => loop(i)));
  agent.destroy();

  latencies.sort((a, b) => a - b);
  const pct = (q: number) =>
    latencies.length
      ? (latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)] as number)
      : 0;
  return {
    sent,
    answered,
    byStatus,
    refused,
    lost,
    errors,
    malformed,
    malformedSamples,
    maxLatencyMs: Math.round(latencies.at(-1) ?? 0),
    p50Ms: Math.round(pct(0.5)),
    p99Ms: Math.round(pct(0.99)),
    durationMs: Math.round(now()),
    texts: [...texts],
    outcomes,
    summary: statusSummary(byStatus),
  };
}

export function statusSummary(byStatus: Record<string, number>): string {
  return Object.entries(byStatus)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([status, count]) => `${status}×${count}`)
    .join(' ');
}

function headerBlock(headers: Answer['headers']): string {
  return Object.entries(headers)
    .filter(([name]) => name !== 'date' && name !== 'x-request-id' && name !== 'content-length')
    .map(([name, value]) => `${name}: ${Array.isArray(value) ? value.join(', ') : value}`)
    .join('\n');
}

/** Why an answer is not well-formed, or undefined when it is. */
export function malformation(answer: Answer): string | undefined {
  if (!answer.headers['x-request-id']) return 'no X-Request-Id';
  let body: unknown;
  try {
    body = JSON.parse(answer.body);
  } catch {
    return 'body is not JSON';
  }
  if (answer.status < 400) return undefined;
  const envelope = body as { status?: { code?: unknown; description?: unknown }; requestId?: unknown };
  if (
    typeof envelope?.status?.description !== 'string' ||
    typeof envelope.status.code !== 'string' ||
    (typeof envelope.requestId === 'string' && envelope.requestId !== answer.headers['x-request-id'])
  )
    return 'not an error envelope';
  return undefined;
}
