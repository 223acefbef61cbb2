// One circuit per operation, opened by a failure ratio: the real gateway against the simulator as a real upstream.
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

const KEY = 'circuit-test-key-0123456789';
const PASSWORD = 'circuit-upstream-password';
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const GOOD_ID = '20-17254359-7';
/** Ids the simulated provider fails on (its fault injection answers 500 for exactly these). */
const POISON_IDS = ['20-11111111-2', '27-22222222-3', '23-33333333-4'];
const RESET_MS = 600;

let simulator: RunningSimulator;
let clientsFile: string;
let gw: TestGateway;

const validation = async (id: string) => {
  const res = await fetch(`${gw.url}/api/validation/document`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ country: 'ARG', document: { id, type: 'CUIT' } }),
  });
  const body = (await res.json()) as { status?: { description: string } };
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body };
};
const planRead = async (id = PLAN_ID) =>
  (await fetch(`${gw.url}/api/subscriptions/plan/${id}`, { headers: { 'x-api-key': KEY } })).status;
const readiness = async () => {
  const report = (await (await fetch(`${gw.url}/readyz`)).json()) as { checks: { circuits: unknown } };
  return report.checks.circuits;
};
const circuitGauge = async (operation: string) => {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const match = new RegExp(
    `^upstream_circuit_state\\{operation="${operation}",account="default"\\} (\\d)$`,
    'm',
  ).exec(text);
  return match ? Number(match[1]) : undefined;
};

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: 'circuit-merchant', password: PASSWORD });
  clientsFile = writeClientsFile([
    { id: 'circuit-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
  ]);
});

afterAll(async () => {
  await simulator?.close();
});

const startGateway = (circuit: Record<string, string> = {}) =>
  startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'circuit-merchant',
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
    RATE_LIMIT_DEFAULT_LIMIT: '100000',
    // The defaults except a shorter reset, so the test does not wait 10 s for the probe.
    CIRCUIT_FAILURE_RATIO: '0.5',
    CIRCUIT_WINDOW_MS: '10000',
    CIRCUIT_MINIMUM_CALLS: '20',
    CIRCUIT_RESET_MS: String(RESET_MS),
    ...circuit,
  });

// A fresh gateway per test: each starts with empty circuit windows.
beforeEach(async () => {
  simulator.setFaults({ failIds: POISON_IDS, errorStatus: 500 });
  gw = await startGateway();
});

afterEach(async () => {
  await gw?.close();
});

test('poison requests among normal traffic never open the circuit, even several in a row', async () => {
  // Six in a row first: the consecutive-failure breaker this replaced (5 by default) opened here.
  for (let i = 0; i < 6; i++) expect((await validation(POISON_IDS[i % 3] as string)).status).toBe(502);
  const statuses: number[] = [];
  for (let i = 0; i < 60; i++) {
    const poison = i % 7 === 3;
    const { status } = await validation(poison ? (POISON_IDS[i % 3] as string) : GOOD_ID);
    expect(status).toBe(poison ? 502 : 200);
    statuses.push(status);
  }
  expect(statuses).not.toContain(503);
  expect(await readiness()).toEqual({ validation: { state: 'closed' }, plan: { state: 'closed' } });
  expect(await circuitGauge('validation')).toBe(0);
});

test('upstream 4xx answers (plan not found) never count as failures', async () => {
  for (let i = 0; i < 40; i++) {
    expect(await planRead(`00000000-0000-4000-8000-${String(i).padStart(12, '0')}`)).toBe(404);
  }
  expect(await planRead()).toBe(200);
  expect(((await readiness()) as Record<string, unknown>).plan).toEqual({ state: 'closed' });
});

test('answers outside the contract (a firewall’s HTML 400, a redirect) never count: a caller cannot open the circuit', async () => {
  simulator.setFaults({ errorRate: 1, errorStatus: 400, errorBody: 'html' });
  for (let i = 0; i < 30; i++) expect(await planRead()).toBe(502);
  simulator.setFaults({ errorRate: 1, errorStatus: 302 });
  for (let i = 0; i < 10; i++) expect(await planRead()).toBe(502);
  simulator.setFaults({});
  expect(await planRead()).toBe(200);
  expect(((await readiness()) as Record<string, unknown>).plan).toEqual({ state: 'closed' });
});

test('upstream 401s that renew the token never count as failures', async () => {
  expect(await planRead()).toBe(200);
  const unauthorizedBefore = simulator.stats().unauthorized;
  for (let i = 0; i < 25; i++) {
    simulator.revokeTokens(); // the next call gets a 401, renews once and retries
    expect(await planRead()).toBe(200);
  }
  expect(simulator.stats().unauthorized - unauthorizedBefore).toBe(25);
  expect(((await readiness()) as Record<string, unknown>).plan).toEqual({ state: 'closed' });
});

test('an outage of one operation opens its circuit only, answers 503 fast, and a probe closes it', async () => {
  // A real outage of the validation endpoint: every document the callers send fails upstream.
  const outageIds = Array.from({ length: 30 }, (_, i) => `20-${String(40_000_000 + i)}-1`);
  simulator.setFaults({ failIds: outageIds, errorStatus: 503 });
  const statuses: number[] = [];
  for (const id of outageIds) statuses.push((await validation(id)).status);
  expect(statuses.slice(0, 5)).toEqual([502, 502, 502, 502, 502]);
  expect(statuses).toContain(503);

  const upstreamCallsBefore = simulator.stats().requests;
  const open = await validation(GOOD_ID);
  expect(open.status).toBe(503);
  expect(open.body.status?.description).toBe('UPSTREAM_UNAVAILABLE');
  expect(Number(open.retryAfter)).toBeGreaterThanOrEqual(1);
  expect(simulator.stats().requests).toBe(upstreamCallsBefore);

  // The other operation's circuit is untouched.
  expect(await planRead()).toBe(200);
  expect(await readiness()).toEqual({ validation: { state: 'open' }, plan: { state: 'closed' } });
  expect(await circuitGauge('validation')).toBe(2);
  expect(await circuitGauge('plan')).toBe(0);

  // The provider recovers; after CIRCUIT_RESET_MS one probe goes through and closes the circuit.
  simulator.setFaults({});
  await new Promise((resolve) => setTimeout(resolve, RESET_MS + 100));
  expect((await validation(GOOD_ID)).status).toBe(200);
  expect(await readiness()).toEqual({ validation: { state: 'closed' }, plan: { state: 'closed' } });
  expect(await circuitGauge('validation')).toBe(0);
  expect((await validation(GOOD_ID)).status).toBe(200);
  expect(gw.logs()).toMatch(/"operation":"validation","circuit":"open"/);
});

test('an outage behind a load balancer’s page: the probe that gets the page (HTML or a redirect) keeps the circuit open', async () => {
  const outageIds = Array.from({ length: 30 }, (_, i) => `20-${String(50_000_000 + i)}-1`);
  simulator.setFaults({ failIds: outageIds, errorStatus: 503 });
  for (const id of outageIds) await validation(id);
  expect(await readiness()).toMatchObject({ validation: { state: 'open' } });
  for (const page of [{ errorStatus: 404, errorBody: 'html' as const }, { errorStatus: 302 }]) {
    simulator.setFaults({ ...page, errorRate: 1 });
    await new Promise((resolve) => setTimeout(resolve, RESET_MS + 100));
    // The probe goes out and gets the page: 502, and the circuit opens again (callers answered 503 at once).
    expect((await validation(GOOD_ID)).status).toBe(502);
    expect(await readiness()).toMatchObject({ validation: { state: 'open' } });
    expect((await validation(GOOD_ID)).status).toBe(503);
  }
  simulator.setFaults({});
  await new Promise((resolve) => setTimeout(resolve, RESET_MS + 100));
  expect((await validation(GOOD_ID)).status).toBe(200);
  expect(await readiness()).toMatchObject({ validation: { state: 'closed' } });
});

test('failures that left the window no longer count, however quiet the traffic was since', async () => {
  await gw.close();
  gw = await startGateway({ CIRCUIT_WINDOW_MS: '1000', CIRCUIT_MINIMUM_CALLS: '10' });
  // A blip below the minimum of calls, then a quiet spell longer than the window.
  for (let i = 0; i < 8; i++) expect((await validation(POISON_IDS[i % 3] as string)).status).toBe(502);
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  // A handful of poison requests now: the window holds these four calls only, below the minimum.
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await validation(POISON_IDS[i % 3] as string)).status);
  expect(statuses).toEqual([502, 502, 502, 502]);
  expect(await readiness()).toEqual({ validation: { state: 'closed' }, plan: { state: 'closed' } });
});
