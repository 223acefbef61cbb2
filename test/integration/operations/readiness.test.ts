// /readyz: ready when healthy, degraded-but-ready without Redis, 503 when the upstream refuses the
// credentials, and 503 while draining.
import { connect } from 'node:net';
import { loadConfig } from '../../../src/config/load-config';
import { type RunningGateway, startGateway } from '../../../src/gateway';
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
