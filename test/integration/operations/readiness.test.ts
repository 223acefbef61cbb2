// /readyz: ready when healthy, degraded-but-ready without Redis, 503 when the upstream refuses the
// credentials, and 503 while draining.
import { connect } from 'node:net';
import type { GatewayConfig } from '../../../src/config/gateway-config';
import { loadConfig } from '../../../src/config/load-config';
import { type RunningGateway, startGateway } from '../../../src/gateway';
import { probeAccount } from '../../../src/operations/doctor-account-probe';
import { type BudgetCheck, diagnoseBudget } from '../../../src/operations/doctor-budget';
import type { ReadinessReport } from '../../../src/operations/readiness';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { API_KEY, captureLogs, gatewayEnv, PASSWORD, PLAN_ID, USERNAME } from '../../support/ops-fixture';
import { waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

async function readyz(
  gateway: RunningGateway,
): Promise<{ status: number; body: ReadinessReport; text: string }> {
  const response = await fetch(`${gateway.url}/readyz`);
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text) as ReadinessReport, text };
}

const getPlan = (gateway: RunningGateway) =>
  fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, { headers: { 'x-api-key': API_KEY } });

/** An account with no "budget" that learned nothing: unbounded, no pause, one replica. */
const UNBOUNDED_BUDGET = {
  configuredRate: null,
  effectiveRate: null,
  learnedRate: null,
  pausedUntil: null,
  probing: false,
  degraded: false,
  replicas: 1,
  allocation: null,
  fleetShare: null,
};

describe('readiness with Redis', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateway: RunningGateway;

  beforeAll(async () => {
    // Durable, as the deployment ships it: the ledger's store check is ok too.
    redis = await startRedisServer(['--appendonly', 'yes', '--appendfsync', 'everysec']);
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    gateway = await startGateway(loadConfig(gatewayEnv(simulator.url, { REDIS_URL: redis.url })), {
      logStream: captureLogs().stream,
    });
  });

  afterAll(async () => {
    await gateway?.shutdown();
    await simulator?.close();
    await redis?.stop();
  });

  test('healthy: 200 ready, every check ok, no secret in the detail', async () => {
    expect((await getPlan(gateway)).status).toBe(200);
    // The ledger store's durability is read in the background once Redis is ready.
    await waitFor(async () => (await readyz(gateway)).body.checks.ledgerStore?.state !== 'unknown', {
      what: "the ledger store's durability read",
    });
    const { status, body, text } = await readyz(gateway);
    expect(status).toBe(200);
    expect(body).toEqual({
      status: 'ready',
      checks: {
        draining: false,
        store: { state: 'ok', kind: 'redis' },
        upstreamToken: { state: 'ok', detail: 'a valid upstream token is held' },
        circuits: { validation: { state: 'closed' }, plan: { state: 'closed' } },
        accounts: {
          default: {
            state: 'ok',
            detail: 'a valid upstream token is held',
            circuits: { validation: { state: 'closed' }, plan: { state: 'closed' } },
            budget: UNBOUNDED_BUDGET,
          },
        },
        clientRegistry: { state: 'ok', detail: 'the client registry matches CLIENTS_FILE' },
        ledgerStore: {
          state: 'ok',
          detail: 'append-only file (appendfsync everysec), maxmemory-policy noeviction',
        },
      },
    });
    for (const secret of [PASSWORD, USERNAME, 'eyJ']) expect(text).not.toContain(secret);
  });

  test('Redis killed: still 200, status degraded, store degraded, and the token manager agrees', async () => {
    await redis.kill();
    await waitFor(async () => (await readyz(gateway)).body.status === 'degraded', {
      what: 'degraded readiness',
    });
    const { status, body } = await readyz(gateway);
    expect(status).toBe(200);
    expect(body.checks.store).toEqual({ state: 'degraded', kind: 'redis' });
    expect(body.checks.upstreamToken.state).toBe('ok');
    expect(gateway.tokens.status().storeHealthy).toBe(false);
    expect((await getPlan(gateway)).status).toBe(200);
  });

  test('Redis back: ready again without a restart', async () => {
    await redis.restart();
    await waitFor(async () => (await readyz(gateway)).body.status === 'ready', {
      what: 'ready after Redis restart',
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    expect((await readyz(gateway)).body.checks.store.state).toBe('ok');
  });
});

describe("the provider budget's state in /readyz and in the doctor", () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateway: RunningGateway;
  let config: GatewayConfig;

  beforeAll(async () => {
    redis = await startRedisServer();
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    config = loadConfig(gatewayEnv(simulator.url, { REDIS_URL: redis.url }));
    gateway = await startGateway(config, { logStream: captureLogs().stream });
  });

  afterAll(async () => {
    await gateway?.shutdown();
    await simulator?.close();
    await redis?.stop();
  });

  test("a provider 429 with Retry-After: /readyz names the fleet's pause and stays 200 ready; the doctor warns, never fails", async () => {
    expect((await getPlan(gateway)).status).toBe(200);
    await fetch(`${simulator.url}/__simulator/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ next429RetryAfterSeconds: 120 }),
    });
    const before = Date.now();
    expect((await getPlan(gateway)).status).toBe(429);
    // The calls after it meet the pause (every replica's callers alike: taking one out would not help).
    expect((await getPlan(gateway)).status).toBe(503);
    const { status, body } = await readyz(gateway);
    expect(status).toBe(200);
    expect(body.status).toBe('ready');
    const budget = body.checks.accounts.default?.budget;
    expect(budget).toMatchObject({ ...UNBOUNDED_BUDGET, pausedUntil: expect.any(String) });
    const pausedFor = Date.parse(budget?.pausedUntil ?? '') - before;
    expect(pausedFor).toBeGreaterThan(100_000);
    expect(pausedFor).toBeLessThanOrEqual(121_000);

    // The doctor reads the same pause from the fleet's record in Redis (another process would, too).
    const account = gateway.accounts.all()[0];
    if (!account) throw new Error('no account');
    const probe = await probeAccount(config, account.spec);
    try {
      const check = await probe.readBudget?.();
      expect(check).toMatchObject({ kind: 'fleet', view: { found: true, replicas: [expect.anything()] } });
      const step = diagnoseBudget(check as BudgetCheck, account.spec);
      expect(step.state).toBe('warn');
      expect(step.detail).toMatch(
        /^configured none configured .*; effective unbounded; 1 live replica holding 0\/s; PAUSED for (1 min [45]\d s|2 min) more/,
      );
    } finally {
      await probe.close();
    }
  });
});

describe('readiness when the upstream refuses the credentials', () => {
  let simulator: RunningSimulator;
  let gateway: RunningGateway;

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: USERNAME, password: 'another-password' });
    gateway = await startGateway(loadConfig(gatewayEnv(simulator.url)), { logStream: captureLogs().stream });
  });

  afterAll(async () => {
    await gateway?.shutdown();
    await simulator?.close();
  });

  test('503 not-ready naming the refusal, never the credential', async () => {
    expect((await getPlan(gateway)).status).toBe(502);
    const { status, body, text } = await readyz(gateway);
    expect(status).toBe(503);
    expect(body.status).toBe('not-ready');
    expect(body.checks.upstreamToken.state).toBe('failing');
    expect(body.checks.upstreamToken.detail).toContain('UPSTREAM_AUTH_FAILED');
    for (const secret of [PASSWORD, 'another-password', USERNAME]) expect(text).not.toContain(secret);
  });
});

/** Opens a connection and sends all of a GET but its final blank line: the server sees a request in progress. */
function halfSentRequest(url: string, path: string) {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  let answer = '';
  socket.on('data', (chunk) => {
    answer += chunk.toString();
  });
  const ended = new Promise<string>((resolve) => {
    socket.on('close', () => resolve(answer));
    socket.on('error', () => undefined);
  });
  const opened = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return {
    async start() {
      await opened;
      socket.write(`GET ${path} HTTP/1.1\r\nHost: gateway\r\n`);
    },
    finish(): Promise<string> {
      socket.write('\r\n');
      return ended;
    },
  };
}

describe('readiness while draining', () => {
  let simulator: RunningSimulator;
  let gateway: RunningGateway;

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    gateway = await startGateway(loadConfig(gatewayEnv(simulator.url)), { logStream: captureLogs().stream });
  });

  afterAll(async () => {
    await gateway?.shutdown();
    await simulator?.close();
  });

  test('shutdown() started: /readyz answers 503 while an in-flight request still finishes with 200', async () => {
    expect((await getPlan(gateway)).status).toBe(200);
    simulator.setFaults({ latencyMs: 1000 });
    const probe = halfSentRequest(gateway.url, '/readyz');
    await probe.start();
    const inFlight = getPlan(gateway);
    await new Promise((r) => setTimeout(r, 200));

    const stopped = gateway.shutdown();
    expect(gateway.readiness.report()).toMatchObject({ status: 'not-ready', checks: { draining: true } });
    const answer = await probe.finish();
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer).toMatch(/connection: close/i);
    expect(answer).toContain('"draining":true');

    const response = await inFlight;
    expect(response.status).toBe(200);
    expect(((await response.json()) as { internalId: string }).internalId).toBe(PLAN_ID);
    await stopped;
  });
});
