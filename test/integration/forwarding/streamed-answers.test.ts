// `answer: "stream"` operations (issue 40): the provider's answer piped to the caller through http-proxy-middleware as
// it arrives, never buffered, with the forwarder's flow around it (token, 401 retry, envelopes, timeout, circuit,
// ledger). The real gateway against the simulator's statement export (a few MiB of CSV) over real HTTP.
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { SEED_SUBSCRIPTION_ID, subscriptionStatement } from '../../../src/simulator/subscriptions';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { catalogueWithStatement } from '../../support/statement-operation';
import { tempDir } from '../../support/temp-dir';

jest.setTimeout(30_000);

const KEY = 'streamed-answers-key-0123456789';
const USERNAME = 'streamed-merchant';
const PASSWORD = 'streamed-password';
const STATEMENT = `/api/subscriptions/${SEED_SUBSCRIPTION_ID}/statement`;
const auth = { 'x-api-key': KEY };

let simulator: RunningSimulator;
let gw: TestGateway;
let clientsFile: string;
let operationsFile: string;

const startGateway = (env: Record<string, string> = {}) =>
  startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
    OPERATIONS_FILE: operationsFile,
    ...env,
  });

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  clientsFile = writeClientsFile([{ id: 'streamed-app', keys: [KEY], scopes: ['plans:read'] }]);
  operationsFile = join(tempDir('streamed-answers-'), 'operations.json');
  writeFileSync(operationsFile, catalogueWithStatement({ timeoutMs: 1_000 }));
  gw = await startGateway();
});

afterAll(async () => {
  await gw?.close();
  await simulator?.close();
});

beforeEach(() => simulator.reset());

/** Polls `done` until it holds, for at most 10 s (then the test's own expectation fails). */
async function waitFor(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await new Promise((r) => setTimeout(r, 20));
}

/** The request log's lines of one operation, oldest first. */
function requestLines(gateway: TestGateway, route: string): Record<string, unknown>[] {
  return gateway
    .logs()
    .split('\n')
    .filter((line) => line.includes('"msg":"request"'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.route === route);
}

async function get(path: string) {
  const res = await fetch(gw.url + path, { headers: auth });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

test('a 3 MiB statement streams through byte for byte, with the allow-listed headers only', async () => {
  const answer = await get(STATEMENT);
  expect(answer.status).toBe(200);
  expect(answer.body.length).toBe(3 * 1024 * 1024);
  expect(answer.body.equals(subscriptionStatement(SEED_SUBSCRIPTION_ID))).toBe(true);
  expect(answer.headers.get('content-type')).toBe('text/csv; charset=utf-8');
  expect(answer.headers.get('content-length')).toBe(String(3 * 1024 * 1024));
  // The export's file name reaches the caller, who saves it under that name.
  expect(answer.headers.get('content-disposition')).toBe(
    `attachment; filename="statement-${SEED_SUBSCRIPTION_ID}.csv"`,
  );
  // The provider's session cookie and X-Powered-By stay behind; the gateway's own headers are there.
  expect(answer.headers.get('set-cookie')).toBeNull();
  expect(answer.headers.get('x-powered-by')).toBeNull();
  expect(answer.headers.get('x-upstream-account')).toBe('default');
  expect(answer.headers.get('x-request-id')).toBeTruthy();
  expect(answer.headers.get('cache-control')).toBe('no-store');
  // The provider got the gateway's own token and request id, never the caller's key.
  const [sent] = simulator.receivedRequests();
  expect(sent?.headers.authorization).toMatch(/^Bearer /);
  expect(sent?.headers['x-api-key']).toBeUndefined();
  // The ledger's and the log's fields: the provider's answer, billable, its time on the upstream.
  const [line] = requestLines(gw, 'statement');
  expect(line).toMatchObject({ status: 200, billable: true });
  expect(line?.upstreamMs).toBeGreaterThan(0);
});

test("a read answer (the same export read whole, 4 KiB) keeps the provider's Content-Disposition too", async () => {
  const read = await get(`${STATEMENT}-read?kib=4`);
  expect(read.status).toBe(200);
  expect(read.body.equals(subscriptionStatement(SEED_SUBSCRIPTION_ID, 4))).toBe(true);
  expect(read.headers.get('content-disposition')).toBe(
    `attachment; filename="statement-${SEED_SUBSCRIPTION_ID}.csv"`,
  );
});

test('the 1 MiB cap of read answers does not apply: the same provider path read whole is refused', async () => {
  const read = await get(`${STATEMENT}-read`);
  expect(read.status).toBe(502);
  expect(JSON.parse(read.body.toString()).status.description).toBe('UPSTREAM_UNAVAILABLE');
  const streamed = await get(`${STATEMENT}?kib=8192`);
  expect(streamed.status).toBe(200);
  expect(streamed.body.equals(subscriptionStatement(SEED_SUBSCRIPTION_ID, 8192))).toBe(true);
});

test('HEAD of a streamed GET: the head, with the length, and no body', async () => {
  const res = await fetch(gw.url + STATEMENT, { method: 'HEAD', headers: auth });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-length')).toBe(String(3 * 1024 * 1024));
  expect((await res.arrayBuffer()).byteLength).toBe(0);
});

test('each caller of a streamed GET gets its own provider call (no coalescing)', async () => {
  const answers = await Promise.all([get(STATEMENT), get(STATEMENT), get(STATEMENT)]);
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
  expect(simulator.stats().statements).toBe(3);
});

test('a revoked token: the 401 is drained, the token renewed once, the caller gets the 200 stream', async () => {
  expect((await get(STATEMENT)).status).toBe(200);
  simulator.reset();
  simulator.revokeTokens();
  const answer = await get(STATEMENT);
  expect(answer.status).toBe(200);
  expect(answer.body.equals(subscriptionStatement(SEED_SUBSCRIPTION_ID))).toBe(true);
  const stats = simulator.stats();
  expect(stats.unauthorized).toBe(1);
  expect(stats.statements).toBe(1);
  expect(stats.logins + stats.refreshes).toBe(1);
});

test('a 403 is the IP envelope, a 5xx the unavailable envelope, a provider 404 passes through', async () => {
  simulator.setFaults({ errorRate: 1, errorStatus: 403 });
  const refused = await get(STATEMENT);
  expect(refused.status).toBe(502);
  expect(JSON.parse(refused.body.toString()).status.description).toBe('UPSTREAM_IP_NOT_WHITELISTED');

  simulator.setFaults({ errorRate: 1, errorStatus: 500 });
  const failed = await get(`/api/subscriptions/sub_5xx/statement`);
  expect(failed.status).toBe(502);
  expect(JSON.parse(failed.body.toString()).status.description).toBe('UPSTREAM_UNAVAILABLE');

  simulator.setFaults({});
  const missing = await get('/api/subscriptions/sub_unknown/statement');
  expect(missing.status).toBe(404);
  expect(JSON.parse(missing.body.toString()).status.detail).toBe('Subscription not found');
});

test('no head within x-gateway.timeoutMs is UPSTREAM_TIMEOUT', async () => {
  simulator.setFaults({ latencyMs: 3_000 });
  const answer = await get(`/api/subscriptions/sub_3Kd8Pq1Z/statement`);
  expect(answer.status).toBe(504);
  expect(JSON.parse(answer.body.toString()).status.description).toBe('UPSTREAM_TIMEOUT');
  simulator.setFaults({});
});

test('a caller who hangs up mid-stream ends the upstream response; no failure for the circuit', async () => {
  // A fresh gateway whose circuits open on one failure in one call: a hang-up counted against the circuit would show.
  const fresh = await startGateway({
    CIRCUIT_FAILURE_RATIO: '0.5',
    CIRCUIT_MINIMUM_CALLS: '1',
    CIRCUIT_RESET_MS: '60000',
  });
  try {
    await hangUpMidStream(fresh);
  } finally {
    await fresh.close();
  }
});

async function hangUpMidStream(fresh: TestGateway) {
  const cut = await new Promise<number>((resolve, reject) => {
    const url = new URL(`${STATEMENT}?kib=32768`, fresh.url);
    const req = request(url, { headers: auth }, (res) => {
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        // Some of it arrived, far from all (32 MiB): hang up.
        if (received >= 256 * 1024) req.destroy();
      });
      res.on('error', () => undefined);
      req.on('close', () => resolve(received));
    });
    req.on('error', () => undefined);
    req.on('timeout', reject);
    req.end();
  });
  expect(cut).toBeLessThan(32 * 1024 * 1024);
  // The simulator sees its answer's connection closed before the end.
  await waitFor(() => simulator.stats().statementsCut > 0);
  expect(simulator.stats().statementsCut).toBe(1);
  // The gateway goes on: the circuit stayed closed (one failure would have opened it), the next caller is served.
  const report = (await (await fetch(`${fresh.url}/readyz`)).json()) as { checks: { circuits: unknown } };
  expect(JSON.stringify(report.checks.circuits)).toContain('"statement":{"state":"closed"}');
  const next = await fetch(`${fresh.url}${STATEMENT}`, { headers: auth });
  expect(next.status).toBe(200);
  expect((await next.arrayBuffer()).byteLength).toBe(3 * 1024 * 1024);
  // The caller's: logged as a 499, the provider's answer billed as it answered.
  const [line] = requestLines(fresh, 'statement');
  expect(line).toMatchObject({ status: 499, billable: true });
  expect(fresh.logs()).not.toMatch(/unhandled|uncaught|"level":50/i);
}

test('a provider 429 reaches the caller and pauses the account: the next streamed call is never sent', async () => {
  // Its own gateway: the pause would hold the shared one's account for the Retry-After.
  const fresh = await startGateway();
  try {
    simulator.setFaults({ next429RetryAfterSeconds: 30 });
    const limited = await fetch(fresh.url + STATEMENT, { headers: auth });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('30');
    await limited.arrayBuffer();
    const paused = await fetch(fresh.url + STATEMENT, { headers: auth });
    expect(paused.status).toBe(503);
    expect(((await paused.json()) as { status: { description: string } }).status.description).toBe(
      'UPSTREAM_RATE_LIMITED',
    );
    // The provider saw the first call only: the budget refused the second before it left.
    expect(simulator.receivedRequests().filter((r) => r.path.endsWith('/statement'))).toHaveLength(1);
  } finally {
    simulator.setFaults({});
    await fresh.close();
  }
});

test('a caller who hangs up before the head: the provider answer is ended when it comes, nothing breaks', async () => {
  simulator.setFaults({ latencyMs: 300 });
  const gone = new AbortController();
  // 32 MiB: more than the sockets' buffers hold, so the simulator cannot have written it all when it is dropped.
  // The call is known at the provider by its request id (another test's late call cannot be mistaken for it).
  const requestId = randomUUID();
  const ours = () => simulator.receivedRequests().filter((r) => r.headers['x-request-id'] === requestId);
  const pending = fetch(`${gw.url}${STATEMENT}?kib=32768`, {
    headers: { ...auth, 'x-request-id': requestId },
    signal: gone.signal,
  });
  await waitFor(() => ours().length > 0);
  gone.abort();
  await expect(pending).rejects.toThrow();
  // The head comes after the latency; the gateway drops the answer with nobody to read it: sent once, never retried.
  await waitFor(() => simulator.stats().statementsCut > 0);
  expect(ours()).toHaveLength(1);
  expect(simulator.stats().statementsCut).toBeGreaterThanOrEqual(1);
  simulator.setFaults({});
  const next = await get(STATEMENT);
  expect(next.status).toBe(200);
  expect(next.body.length).toBe(3 * 1024 * 1024);
});
