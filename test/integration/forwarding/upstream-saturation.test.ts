// The bounded wait for an upstream socket, against the simulator as a real slow HTTP upstream: excess callers get
// 503 UPSTREAM_SATURATED with Retry-After once UPSTREAM_QUEUE_TIMEOUT_MS is over, and are never sent upstream.
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

const KEY = 'saturation-test-key-0123456789';
const PASSWORD = 'saturation-upstream-password';
const SOCKETS = 2;
/** Far longer than the queue timeout, so every queued caller times out while both sockets are busy. */
const UPSTREAM_LATENCY_MS = 3_000;

let simulator: RunningSimulator;
let gw: TestGateway;
/** The same settings with a long queue timeout: whoever leaves its line does so by hanging up, not by timing out. */
let patient: TestGateway;
let clientsFile: string;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, any>;
}

function startGateway(queueTimeoutMs: number): Promise<TestGateway> {
  return startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'saturation-merchant',
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
    UPSTREAM_MAX_SOCKETS: String(SOCKETS),
    UPSTREAM_QUEUE_TIMEOUT_MS: String(queueTimeoutMs),
    UPSTREAM_TIMEOUT_MS: '20000',
    // Two upstream failures would open the circuit: saturation must not count as one.
    CIRCUIT_MINIMUM_CALLS: '2',
    CIRCUIT_FAILURE_RATIO: '0.1',
    PLAN_CACHE_TTL_SECONDS: '0',
  });
}

/** One plan read on its own connection; `hangUp` aborts it. */
function readPlan(id: string, through = gw): { answer: Promise<Answer>; hangUp(): void } {
  const { hostname, port } = new URL(through.url);
  let hangUp = () => {};
  const answer = new Promise<Answer>((resolve, reject) => {
    const req = httpRequest(
      {
        host: hostname,
        port,
        path: `/api/subscriptions/plan/${id}`,
        headers: { 'x-api-key': KEY },
        agent: false,
      },
      (res) => {
        let text = '';
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) }),
        );
      },
    );
    req.on('error', reject);
    req.end();
    hangUp = () => req.destroy();
  });
  return { answer, hangUp: () => hangUp() };
}

async function gauge(name: string, of = gw): Promise<number> {
  const metric = of.gateway.metrics.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return values[0]?.value ?? Number.NaN;
}

/** Polls (bounded) until `check` holds; no timing is asserted. */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`never happened: ${what}`);
}

const planPathsReceived = () =>
  simulator
    .receivedRequests()
    .map((r) => r.path)
    .filter((p) => p.startsWith('/api/subscriptions/plan/'));

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: 'saturation-merchant', password: PASSWORD });
  clientsFile = writeClientsFile([{ id: 'saturation-app', keys: [KEY], scopes: ['plans:read'] }]);
  gw = await startGateway(200);
  patient = await startGateway(20_000);
});

afterAll(async () => {
  await gw?.close();
  await patient?.close();
  await simulator?.close();
});

beforeEach(() => {
  simulator.reset();
});

it('answers excess callers 503 UPSTREAM_SATURATED with Retry-After, never sends them upstream, and keeps the circuit closed', async () => {
  simulator.setFaults({ latencyMs: UPSTREAM_LATENCY_MS });
  // Different plans: nothing coalesces, every read needs a socket of its own.
  const ids = Array.from({ length: SOCKETS + 4 }, () => randomUUID());
  const calls = ids.map((id) => readPlan(id).answer);
  const settled: Answer[] = [];
  for (const call of calls) void call.then((a) => settled.push(a));

  // The gauges while the two sockets are busy and the other four wait in line.
  await until('two upstream calls in flight', async () => planPathsReceived().length === SOCKETS);
  await until('four callers waiting', async () => (await gauge('upstream_requests_waiting')) === 4);
  expect(await gauge('upstream_sockets_in_use')).toBe(SOCKETS);

  // The four waiting callers are answered while the two upstream calls are still running.
  await until('four answers', async () => settled.length === 4);
  expect(settled.map((a) => a.status)).toEqual([503, 503, 503, 503]);
  for (const answer of settled) {
    expect(answer.body.status).toMatchObject({ code: '503', description: 'UPSTREAM_SATURATED' });
    expect(answer.headers['retry-after']).toBe('1');
  }
  expect(await gauge('upstream_requests_waiting')).toBe(0);

  const answers = await Promise.all(calls);
  expect(answers.filter((a) => a.status === 404)).toHaveLength(SOCKETS); // unknown plans, passed through
  // Only the two that held a socket reached the upstream; a socket freed later sends none of the timed-out ones.
  const received = planPathsReceived();
  expect(received).toHaveLength(SOCKETS);
  const sentIds = received.map((p) => p.split('/').pop());
  expect(ids.filter((id) => sentIds.includes(id))).toHaveLength(SOCKETS);
  await until('sockets released', async () => (await gauge('upstream_sockets_in_use')) === 0);

  // Four saturations against a threshold of two: the circuit is still closed and the next call goes through.
  simulator.setFaults({});
  const after = await readPlan('b8546575-5d4f-4a56-9e21-522d01cf5992').answer;
  expect(after.status).toBe(200);
  expect(await gauge('upstream_circuit_state')).toBe(0);
  expect(planPathsReceived()).toHaveLength(SOCKETS + 1);
});

it('drops a waiting caller who hangs up from the line, and never sends its call upstream', async () => {
  simulator.setFaults({ latencyMs: UPSTREAM_LATENCY_MS });
  const busy = Array.from({ length: SOCKETS }, () => readPlan(randomUUID(), patient).answer);
  await until('both sockets busy', async () => planPathsReceived().length === SOCKETS);

  const leaving = randomUUID();
  const waiting = readPlan(leaving, patient);
  waiting.answer.catch(() => {}); // it hangs up: no answer expected
  await until('one caller waiting', async () => (await gauge('upstream_requests_waiting', patient)) === 1);
  waiting.hangUp();
  await until('the line is empty', async () => (await gauge('upstream_requests_waiting', patient)) === 0);

  await Promise.all(busy);
  simulator.setFaults({});
  // A call after the sockets were freed goes through; the one that left never does.
  const next = await readPlan(randomUUID(), patient).answer;
  expect(next.status).toBe(404);
  const received = planPathsReceived();
  expect(received).toHaveLength(SOCKETS + 1);
  expect(received.some((p) => p.endsWith(leaving))).toBe(false);
});

it('keeps coalesced readers of the same plan served when the caller leading the read hangs up in line', async () => {
  {
    simulator.setFaults({ latencyMs: 1_500 });
    const busy = Array.from({ length: SOCKETS }, () => readPlan(randomUUID(), patient).answer);
    await until('both sockets busy', async () => planPathsReceived().length === SOCKETS);

    const planId = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
    const leader = readPlan(planId, patient);
    leader.answer.catch(() => {}); // it hangs up: no answer expected
    await until('the leader waits', async () => (await gauge('upstream_requests_waiting', patient)) === 1);
    const follower = readPlan(planId, patient).answer;
    // Time for the follower to join the leader's read (it adds nothing to the line) before the leader hangs up.
    await new Promise((r) => setTimeout(r, 200));
    expect(await gauge('upstream_requests_waiting', patient)).toBe(1);
    leader.hangUp();

    await Promise.all(busy);
    const answer = await follower;
    expect(answer.status).toBe(200);
    expect(answer.body.internalId).toBe(planId);
    expect(planPathsReceived().filter((p) => p.endsWith(planId))).toHaveLength(1);
  }
});
