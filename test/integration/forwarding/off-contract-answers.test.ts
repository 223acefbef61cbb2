// Provider answers outside the contract (a redirect, a 4xx that is not JSON) end a call as no provider answer, across
// the features that read the call's outcome: a keyed request's claim is released (its retry is forwarded, never a
// replay of the 502), the client's quota is not spent, and the request log says nothing was billed. A real gateway in
// process, the simulator as the provider, a real Redis. A 303 after a POST is the exception: the provider acted.
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

jest.setTimeout(30_000);

const KEY = 'off-contract-key-0123456789abcd';
const QUOTA_KEY = 'off-contract-quota-0123456789ab';
const USERNAME = 'off-contract-merchant';
const PASSWORD = 'off-contract-password';
const PLAN = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const BODY = JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } });

let redis: RedisServer;
let simulator: RunningSimulator;
let gateway: TestGateway;

beforeAll(async () => {
  redis = await startRedisServer();
  simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  const clients = writeClientsFile([
    { id: 'off-contract-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
    { id: 'off-contract-quota', keys: [QUOTA_KEY], scopes: ['plans:read'], quota: { day: 1 } },
  ]);
  gateway = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clients,
    REDIS_URL: redis.url,
  });
});

afterAll(async () => {
  await gateway?.close();
  await simulator?.close();
  await redis?.stop();
});

afterEach(() => simulator.setFaults({}));

const validate = (idempotencyKey: string) =>
  fetch(`${gateway.url}/api/validation/document`, {
    method: 'POST',
    headers: { 'x-api-key': KEY, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    body: BODY,
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a keyed request answered outside the contract keeps nothing: its retry is forwarded', () => {
  test.each([
    ['a redirect', { errorStatus: 307 }, 502],
    ['an HTML 413 of a load balancer', { errorStatus: 413, errorBody: 'html' as const }, 502],
  ])(
    '%s: a 502, then the retry with the same key reaches the provider and gets its verdict',
    async (_name, fault, status) => {
      const key = `off-contract-${status}-${fault.errorStatus}`;
      simulator.setFaults({ ...fault, errorRate: 1, maxFailures: 1 });
      const first = await validate(key);
      expect(first.status).toBe(status);
      const before = simulator.stats().validations;
      const retry = await validate(key);
      expect(retry.status).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBeNull();
      expect(simulator.stats().validations).toBe(before + 1);
    },
  );

  test('an HTML 429: 503 UPSTREAM_RATE_LIMITED; after its Retry-After the same key is forwarded, not replayed', async () => {
    simulator.setFaults({
      errorStatus: 429,
      errorBody: 'html',
      retryAfterSeconds: 1,
      errorRate: 1,
      maxFailures: 1,
    });
    const limited = await validate('off-contract-429');
    expect(limited.status).toBe(503);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(await limited.json()).toMatchObject({ status: { description: 'UPSTREAM_RATE_LIMITED' } });
    await sleep(1_500);
    const retry = await validate('off-contract-429');
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
  });
});

test('a 303 See Other after a POST (the provider acted): the keyed 502 is kept and replayed, never sent twice', async () => {
  simulator.setFaults({ errorStatus: 303, errorRate: 1, maxFailures: 1 });
  const first = await validate('off-contract-303');
  expect(first.status).toBe(502);
  const before = simulator.stats().validations;
  const retry = await validate('off-contract-303');
  expect(retry.status).toBe(502);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  expect(simulator.stats().validations).toBe(before);
  const lines = gateway.logs().split('\n');
  const warning = lines.find((l) => l.includes('providerActed'));
  expect(JSON.parse(warning ?? '{}')).toMatchObject({ status: 303, providerActed: true });
});

test('an HTML 404 spends none of the client’s quota and is logged as not billed', async () => {
  simulator.setFaults({ errorStatus: 404, errorBody: 'html', failIds: [PLAN] });
  const page = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN}`, {
    headers: { 'x-api-key': QUOTA_KEY },
  });
  expect(page.status).toBe(502);
  const requestId = page.headers.get('x-request-id');
  simulator.setFaults({});
  // The day quota is 1: the provider's first real answer is still within it.
  const plan = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN}`, {
    headers: { 'x-api-key': QUOTA_KEY },
  });
  expect(plan.status).toBe(200);
  const line = gateway
    .logs()
    .split('\n')
    .find((l) => l.includes(`"${requestId}"`) && l.includes('"status":502'));
  expect(JSON.parse(line ?? '{}')).toMatchObject({ billable: false });
});
