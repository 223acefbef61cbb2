// Faults under steady load: three gateway PROCESSES share one redis-server in front of one simulator (short access
// TTL, so tokens are refreshed during the run). Each case drives 20 loops for a few seconds, injects one fault
// mid-load, and counts every request sent and every answer received: nothing lost means every request got a
// well-formed answer (status, X-Request-Id, JSON body; errors in the gateway's error envelope). A table is printed at the end.
import { randomBytes } from 'node:crypto';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { assertNoSecrets, type LabelledText } from '../support/leak-scan';
import { type LoadReport, type LoadRequest, runLoad } from '../support/load';
import { type RedisServer, startRedisServer } from '../support/redis-server';

const KEY = `faults-key-${randomBytes(12).toString('hex')}`;
const USERNAME = 'faults-merchant';
const PASSWORD = `faults-Upstream-Pw-${randomBytes(8).toString('hex')}`;
const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const UPSTREAM_TIMEOUT_MS = 1_000;
const CIRCUIT_RESET_MS = 1_000;
const LOOPS = 20;

const headers = { 'x-api-key': KEY };
const plan: LoadRequest = { method: 'GET', path: `/api/subscriptions/plan/${PLAN_ID}`, headers };
const validation: LoadRequest = {
  method: 'POST',
  path: '/api/validation/document',
  headers: { ...headers, 'content-type': 'application/json' },
  body: JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } }),
};
const mixed = (n: number) => (n % 2 === 0 ? plan : validation);

let redis: RedisServer;
let simulator: RunningSimulator;
let replicas: GatewayProcess[] = [];
const table: string[][] = [];
const captured: LabelledText[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const at = (ms: number, action: () => unknown) => sleep(ms).then(action);

function record(fault: string, done: string, report: LoadReport, verdict: string, extra = '') {
  table.push([
    fault,
    done,
    String(report.sent),
    report.summary + (report.refused ? ` refused×${report.refused}` : '') + extra,
    `${report.maxLatencyMs} ms`,
    verdict,
  ]);
  console.log(
    `fault: ${fault} | requests ${report.sent} | answers ${report.summary} | refused ${report.refused} | lost ${report.lost} | malformed ${report.malformed} | max ${report.maxLatencyMs} ms | p99 ${report.p99Ms} ms`,
  );
  report.texts.forEach((text, i) => {
    captured.push({ where: `${fault}: answer text #${i + 1}`, text });
  });
}

/** Nothing lost, nothing malformed. */
function expectNothingLost(report: LoadReport) {
  expect({ lost: report.lost, errors: report.errors, malformed: report.malformedSamples }).toEqual({
    lost: 0,
    errors: {},
    malformed: [],
  });
  expect(report.answered).toBe(report.sent);
}

function statusesOf(report: LoadReport): number[] {
  return Object.keys(report.byStatus).map(Number).sort();
}

/** Steady load on all replicas, with `during` run alongside (the fault and its end). */
async function loadWith(
  durationMs: number,
  during: () => Promise<unknown>,
  options: Partial<Parameters<typeof runLoad>[0]> = {},
): Promise<LoadReport> {
  const [report] = await Promise.all([
    runLoad({
      targets: replicas.map((r) => r.url),
      concurrency: LOOPS,
      durationMs,
      request: mixed,
      pauseMs: 10,
      timeoutMs: 10_000,
      ...options,
    }),
    during(),
  ]);
  return report;
}

/**
 * One request at a time to each replica and operation, once the circuits had CIRCUIT_RESET_MS to half-open: each is
 * the probe its circuit lets through (and closes it), or a call on a closed circuit. Concurrent first requests would
 * meet a half-open circuit whose one probe is in flight and get 503 by design: the load after this sees closed
 * circuits only.
 */
async function probeEachReplica(): Promise<number[]> {
  const statuses: number[] = [];
  for (const replica of replicas)
    for (const request of [plan, validation]) {
      const answer = await fetch(`${replica.url}${request.path}`, request);
      await answer.arrayBuffer();
      statuses.push(answer.status);
    }
  return statuses;
}

/** Between cases: no faults, circuits closed, every replica answering 200. */
async function settle() {
  simulator.setFaults({});
  await sleep(CIRCUIT_RESET_MS + 100);
  expect(new Set(await probeEachReplica())).toEqual(new Set([200]));
  const check = await runLoad({
    targets: replicas.map((r) => r.url),
    concurrency: replicas.length * 2,
    durationMs: 400,
    request: mixed,
  });
  expect(statusesOf(check)).toEqual([200]);
}

beforeAll(async () => {
  redis = await startRedisServer();
  simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD, accessTtlSeconds: 10 });
  const clientsFile = writeClientsFile([
    { id: 'faults-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
  ]);
  const env = {
    NODE_ENV: 'test',
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: `faults-${randomBytes(4).toString('hex')}:`,
    TOKEN_ENCRYPTION_KEY: ENCRYPTION_KEY,
    TOKEN_REFRESH_SKEW_SECONDS: '4',
    CLIENTS_FILE: clientsFile,
    RATE_LIMIT_DEFAULT_LIMIT: '1000000',
    UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
    CIRCUIT_FAILURE_RATIO: '0.5',
    CIRCUIT_WINDOW_MS: '2000',
    CIRCUIT_MINIMUM_CALLS: '10',
    CIRCUIT_RESET_MS: String(CIRCUIT_RESET_MS),
    SHUTDOWN_TIMEOUT_MS: '10000',
  };
  replicas = await Promise.all([1, 2, 3].map(() => startGatewayProcess({ env, startTimeoutMs: 40_000 })));
}, 60_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop('SIGKILL')));
  await simulator?.close();
  await redis?.stop();
  if (table.length) {
    const head = ['fault', 'what was done', 'requests', 'answers by status', 'max latency', 'verdict'];
    const rows = [head, head.map(() => '---'), ...table];
    console.log(
      `\nReliability table (npx jest test/resilience/faults.test.ts)\n${rows.map((r) => `| ${r.join(' | ')} |`).join('\n')}`,
    );
  }
});

describe('faults under steady load, three replicas', () => {
  test('baseline: steady load, all 200', async () => {
    const report = await loadWith(2_000, async () => undefined);
    expectNothingLost(report);
    expect(statusesOf(report)).toEqual([200]);
    record('none (baseline)', '20 loops on 3 replicas, 2 s', report, 'all 200');
  }, 20_000);

  test('Redis killed and restarted: all 200', async () => {
    const report = await loadWith(4_000, async () => {
      await at(800, () => redis.kill());
      await at(1_500, () => redis.restart());
    });
    expectNothingLost(report);
    expect(statusesOf(report)).toEqual([200]);
    record('Redis killed, restarted', 'SIGKILL at 0.8 s, restart 1.5 s later (empty)', report, 'all 200');
    await settle();
  }, 30_000);

  test('Redis paused (SIGSTOP) for 3 s, then resumed: all 200', async () => {
    const report = await loadWith(5_000, async () => {
      await at(800, () => redis.pause());
      await at(3_000, () => redis.resume());
    });
    expectNothingLost(report);
    expect(statusesOf(report)).toEqual([200]);
    record('Redis hung', 'SIGSTOP at 0.8 s, SIGCONT 3 s later', report, 'all 200');
    await settle();
  }, 30_000);

  test('upstream latency spike (300 ms, below the timeout): all 200', async () => {
    const report = await loadWith(3_500, async () => {
      await at(500, () => simulator.setFaults({ latencyMs: 300 }));
      await at(2_000, () => simulator.setFaults({}));
    });
    expectNothingLost(report);
    expect(statusesOf(report)).toEqual([200]);
    record('upstream latency spike', '+300 ms for 2 s', report, 'all 200');
    await settle();
  }, 30_000);

  test('upstream slower than UPSTREAM_TIMEOUT_MS: 504 UPSTREAM_TIMEOUT (then 503 while the circuit is open), never hangs', async () => {
    const reasons = new Set<string>();
    const report = await loadWith(
      3_000,
      async () => {
        await at(300, () => simulator.setFaults({ latencyMs: 1_500 }));
      },
      {
        onAnswer: (a) => {
          if (a.status >= 400) reasons.add(`${a.status} ${JSON.parse(a.body).status.description}`);
        },
      },
    );
    simulator.setFaults({});
    expectNothingLost(report);
    expect(statusesOf(report).every((s) => [200, 503, 504].includes(s))).toBe(true);
    expect(report.byStatus[504]).toBeGreaterThan(0);
    expect([...reasons].sort()).toEqual(
      ['503 UPSTREAM_UNAVAILABLE', '504 UPSTREAM_TIMEOUT'].filter((r) => reasons.has(r)),
    );
    // Bounded by the timeout, not by the upstream.
    expect(report.maxLatencyMs).toBeLessThan(UPSTREAM_TIMEOUT_MS + 700);
    record(
      'upstream timeout',
      `+1500 ms latency, UPSTREAM_TIMEOUT_MS=${UPSTREAM_TIMEOUT_MS}`,
      report,
      '504 UPSTREAM_TIMEOUT, 503 once the circuit opens',
    );
    await settle();
  }, 30_000);

  test('upstream 5xx burst: 502, then fast 503 with Retry-After while the circuit is open, then 200 again', async () => {
    let open = 0;
    let openWithoutRetryAfter = 0;
    let openMaxLatency = 0;
    const report = await loadWith(
      3_500,
      async () => {
        await at(500, () => simulator.setFaults({ errorRate: 1, errorStatus: 503 }));
        await at(2_000, () => simulator.setFaults({}));
      },
      {
        onAnswer: (a) => {
          if (a.status !== 503) return;
          open += 1;
          if (!a.headers['retry-after']) openWithoutRetryAfter += 1;
          openMaxLatency = Math.max(openMaxLatency, a.latencyMs);
          expect(JSON.parse(a.body).status.description).toBe('UPSTREAM_UNAVAILABLE');
        },
      },
    );
    expectNothingLost(report);
    expect(statusesOf(report)).toEqual([200, 502, 503]);
    expect(open).toBeGreaterThan(0);
    expect(openWithoutRetryAfter).toBe(0);
    // The open circuit answers without calling the upstream: far below the upstream timeout.
    expect(openMaxLatency).toBeLessThan(UPSTREAM_TIMEOUT_MS / 2);
    record(
      'upstream 5xx burst',
      'every call 503 for 2 s (CIRCUIT_RESET_MS=1000)',
      report,
      `502, then 503 + Retry-After (max ${Math.round(openMaxLatency)} ms), closes`,
    );
    // After the burst and CIRCUIT_RESET_MS: each replica's first call (its circuit's probe) succeeds, and every
    // replica answers 200 again under load.
    await sleep(CIRCUIT_RESET_MS + 200);
    expect(new Set(await probeEachReplica())).toEqual(new Set([200]));
    const after = await loadWith(1_500, async () => undefined);
    expectNothingLost(after);
    expect(statusesOf(after)).toEqual([200]);
    record('after the 5xx burst', `load again ${CIRCUIT_RESET_MS} ms after the burst`, after, 'all 200');
    await settle();
  }, 30_000);

  test('upstream connection resets: GETs 200 (one retry), POSTs 502 envelopes, never a 500', async () => {
    simulator.reset();
    let resetGets = 0;
    const report = await loadWith(
      3_000,
      async () => {
        // One upstream connection destroyed every 150 ms (sparse: the circuit stays closed, retries are visible).
        for (let i = 0; i < 16; i++)
          await at(150, () => simulator.setFaults({ resetConnections: true, maxFailures: 1 }));
      },
      {
        onAnswer: (a) => {
          if (a.request.method === 'GET' && a.status !== 200) resetGets += 1;
        },
      },
    );
    const injected = simulator.stats().faultsInjected;
    simulator.setFaults({});
    expectNothingLost(report);
    expect(statusesOf(report).every((s) => [200, 502, 503].includes(s))).toBe(true);
    expect(injected).toBeGreaterThan(5);
    // Most resets hit an idempotent GET or a POST: the GET is retried once (200), the POST answers 502.
    expect(resetGets).toBeLessThan(injected);
    record(
      'upstream connection resets',
      `${injected} upstream connections destroyed, one every 150 ms`,
      report,
      `no 500; GETs retried (${resetGets} GETs not 200)`,
    );
    await settle();
  }, 30_000);

  test('tokens revoked mid-load: all 200', async () => {
    simulator.reset();
    const report = await loadWith(3_000, async () => {
      await at(1_000, () => simulator.revokeTokens());
    });
    const stats = simulator.stats();
    expectNothingLost(report);
    expect(statusesOf(report)).toEqual([200]);
    expect(stats.unauthorized).toBeGreaterThan(0);
    record(
      'tokens revoked',
      `all tokens revoked at 1 s (${stats.unauthorized} upstream 401s, ${stats.logins} logins)`,
      report,
      'all 200',
    );
    await settle();
  }, 30_000);

  test('signing key rotated mid-load: all 200', async () => {
    simulator.reset();
    const report = await loadWith(3_000, async () => {
      await at(1_000, () => simulator.rotateSigningKey());
    });
    const stats = simulator.stats();
    expectNothingLost(report);
    expect(statusesOf(report)).toEqual([200]);
    expect(stats.unauthorized).toBeGreaterThan(0);
    record(
      'signing key rotated',
      `new key at 1 s (${stats.unauthorized} upstream 401s, ${stats.logins} logins)`,
      report,
      'all 200',
    );
    await settle();
  }, 30_000);

  test('a replica SIGTERMed mid-load: its in-flight requests complete, later ones are refused at connect, exit 0', async () => {
    const victim = replicas[2] as GatewayProcess;
    simulator.setFaults({ latencyMs: 200 });
    let signalAt = 0;
    const report = await runLoad({
      targets: [victim.url],
      concurrency: LOOPS,
      durationMs: 3_000,
      request: mixed,
      pauseMs: 10,
      keepAlive: false,
      recordOutcomes: true,
      timeoutMs: 15_000,
      stop: at(1_000, () => {
        signalAt = performance.now();
        victim.child.kill('SIGTERM');
      }).then(() => sleep(2_000)),
    });
    simulator.setFaults({});
    const code = await victim.exited;
    captured.push({ where: 'replica 3 stdout/stderr (after SIGTERM)', text: victim.logs() });
    // Requests whose connection was open well before the signal were accepted: each one must be answered 200.
    const t0 = performance.now() - report.durationMs;
    const signalMs = signalAt - t0;
    const accepted = report.outcomes.filter(
      (o) => o.connectedAt !== undefined && o.connectedAt < signalMs - 50,
    );
    const inFlightAtSignal = accepted.filter((o) => o.endedAt > signalMs);
    const acceptedErrors = accepted.filter((o) => o.status !== 200);
    const atSignal = report.outcomes.filter((o) => o.status === undefined && !accepted.includes(o));
    expect(acceptedErrors).toEqual([]);
    expect(inFlightAtSignal.length).toBeGreaterThan(0);
    expect(report.malformed).toBe(0);
    expect(Object.keys(report.byStatus)).toEqual(['200']);
    // After the listener closed, connections are refused (or reset in the accept race at the very signal).
    expect(report.refused).toBeGreaterThan(0);
    for (const o of atSignal) expect(['ECONNREFUSED', 'ECONNRESET']).toContain(o.error);
    expect(code).toBe(0);
    record(
      'replica SIGTERMed',
      `SIGTERM to 1 of 3 at 1 s, 200 ms upstream latency; ${inFlightAtSignal.length} in flight at the signal`,
      report,
      'in-flight all 200; later connections refused; exit 0',
      atSignal.length - report.refused > 0 ? ` reset-at-signal×${atSignal.length - report.refused}` : '',
    );
  }, 30_000);

  test('leak scan: no secret or JWT in any log, answer or /metrics', async () => {
    for (const [i, replica] of replicas.entries()) {
      if (replica.child.exitCode !== null) continue;
      const metrics = await fetch(`${replica.url}/metrics`);
      expect(metrics.status).toBe(200);
      captured.push({ where: `replica ${i + 1} /metrics`, text: await metrics.text() });
    }
    assertNoSecrets(
      [...captured, ...replicas.map((r, i) => ({ where: `replica ${i + 1} stdout/stderr`, text: r.logs() }))],
      [
        { name: 'the upstream password', value: PASSWORD },
        { name: 'the API key', value: KEY },
        { name: 'TOKEN_ENCRYPTION_KEY', value: ENCRYPTION_KEY },
      ],
    );
  });
});
