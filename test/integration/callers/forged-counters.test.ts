// Counters of the rate limit and of failed authentications written straight into a real Redis by whoever can write
// it: a count that never expires, a window far longer than the limiter's, a value that is not a count. None may lock
// a client or an address out beyond one window, nor make a replica believe Redis is down.
import { Redis } from 'ioredis';
import { authFailurePrefix, rateLimitPrefix } from '../../../src/keys/redis-keys';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const PLAN_PATH = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
/** One client per test: a replica remembers each client's window (its lease) apart. */
const CLIENTS = ['long-window', 'not-a-count', 'wrong-type'] as const;
type TestClientId = (typeof CLIENTS)[number];
const keyOf = (client: TestClientId) => `forged-counters-${client}-0123456789`;
const PREFIX = 'forged-counters:';
const WINDOW_SECONDS = 60;
const TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000;

let redis: RedisServer;
let admin: Redis;
let simulator: RunningSimulator;
let gw: TestGateway;

const rateCounter = (client: TestClientId) => rateLimitPrefix(PREFIX, WINDOW_SECONDS) + client;
const authFailureCounter = `${authFailurePrefix(PREFIX, 300)}127.0.0.1`;

const getPlan = (headers: Record<string, string>) =>
  fetch(gw.url + PLAN_PATH, { headers }).then(async (res) => ({
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body: await res.text(),
  }));

async function storeHealthy(): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  return Number(/^token_store_healthy (\d+)/m.exec(text)?.[1]);
}

beforeAll(async () => {
  redis = await startRedisServer();
  admin = new Redis(redis.url);
  simulator = await startSimulator({ port: 0, username: 'forged-merchant', password: 'forged-password' });
  const clientsFile = writeClientsFile(
    CLIENTS.map((id) => ({
      id,
      keys: [keyOf(id)],
      scopes: ['plans:read'],
      rateLimit: { limit: 100, windowSeconds: WINDOW_SECONDS },
    })),
  );
  gw = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'forged-merchant',
    UPSTREAM_PASSWORD: 'forged-password',
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: PREFIX,
    CLIENTS_FILE: clientsFile,
    AUTH_FAILURE_LIMIT: '5',
    AUTH_FAILURE_WINDOW_SECONDS: '300',
  });
  await waitFor(async () => (await storeHealthy()) === 1, { what: 'Redis healthy' });
});

afterAll(async () => {
  await gw?.close();
  admin?.disconnect();
  await simulator?.close();
  await redis?.stop();
});

describe('a forged rate-limit counter', () => {
  it('spent for ten years: the client is served, the window is the limiter’s own', async () => {
    await admin.set(rateCounter('long-window'), '1000000', 'PX', TEN_YEARS_MS);
    const res = await getPlan({ 'x-api-key': keyOf('long-window') });
    expect(res.status).toBe(200);
    expect(await admin.pttl(rateCounter('long-window'))).toBeLessThanOrEqual(WINDOW_SECONDS * 1000);
    expect(Number(await admin.get(rateCounter('long-window')))).toBeLessThanOrEqual(100);
  });

  it('not a number: the client is served and the replica still counts in Redis, healthy', async () => {
    await admin.set(rateCounter('not-a-count'), 'not-a-count');
    const res = await getPlan({ 'x-api-key': keyOf('not-a-count') });
    expect(res.status).toBe(200);
    expect(await storeHealthy()).toBe(1);
    expect(gw.logs()).not.toContain('cannot reach Redis');
    expect(Number(await admin.get(rateCounter('not-a-count')))).toBeGreaterThanOrEqual(1);
  });

  it('another type of key: the same', async () => {
    await admin.hset(rateCounter('wrong-type'), 'count', '1');
    const res = await getPlan({ 'x-api-key': keyOf('wrong-type') });
    expect(res.status).toBe(200);
    expect(await storeHealthy()).toBe(1);
    expect(gw.logs()).not.toContain('cannot reach Redis');
  });
});

describe('a forged failed-authentication counter', () => {
  it('past the limit for ten years: the address is blocked one window at most', async () => {
    await admin.set(authFailureCounter, '1000000', 'PX', TEN_YEARS_MS);
    const res = await getPlan({ 'x-api-key': 'a-wrong-key-0123456789' });
    // The forged count does not count: this is the address's first failure of a fresh window.
    expect(res.status).toBe(401);
    expect(await admin.pttl(authFailureCounter)).toBeLessThanOrEqual(300_000);
  });

  it.each([
    ['a hash', () => admin.hset(authFailureCounter, 'count', '1000000')],
    ['a list', () => admin.rpush(authFailureCounter, '1000000')],
    ['a set', () => admin.sadd(authFailureCounter, '1000000')],
    ['a stream', () => admin.xadd(authFailureCounter, '*', 'count', '1000000')],
  ])('another type of key (%s): counted afresh in Redis, the replica healthy', async (_name, write) => {
    await admin.del(authFailureCounter);
    await write();
    const res = await getPlan({ 'x-api-key': 'a-wrong-key-0123456789' });
    expect(res.status).toBe(401);
    expect(await admin.type(authFailureCounter)).toBe('string');
    expect(await admin.pttl(authFailureCounter)).toBeLessThanOrEqual(300_000);
    expect(await storeHealthy()).toBe(1);
    expect(gw.logs()).not.toContain('cannot reach Redis');
  });
});
