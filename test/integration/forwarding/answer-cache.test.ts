// The plan cache in a Redis that hangs (SIGSTOP keeps the connection open, commands time out): plan reads go to the
// upstream without each one waiting on Redis first (real Redis, real simulator, the real gateway).
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createRedisAnswerCache } from '../../../src/forwarding';
import { SEED_PLAN_ID } from '../../../src/simulator/plans';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import type { RedisClient } from '../../../src/store/redis-connection';
import { createRecordSeal, createTokenCipher } from '../../../src/tokens';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const KEY = 'answer-cache-key-0123456789';
/** The plan cache's pause after a slow failure (RETRY_HUNG_REDIS_MS in answer-cache.ts). */
const RETRY_HUNG_REDIS_MS = 2_000;

let redis: RedisServer;
let admin: Redis;
let simulator: RunningSimulator;
let gw: TestGateway;

const read = async (planId = SEED_PLAN_ID) => {
  const res = await fetch(`${gw.url}/api/subscriptions/plan/${planId}`, {
    headers: { 'x-api-key': KEY },
  });
  return { status: res.status, body: await res.text() };
};

/** GET commands Redis has run (the cache's reads: nothing else of the gateway GETs while its token is in memory). */
async function redisGets(): Promise<number> {
  return Number(/cmdstat_get:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
}

beforeAll(async () => {
  redis = await startRedisServer();
  admin = new Redis(redis.url);
  simulator = await startSimulator({ port: 0, username: 'cache-merchant', password: 'cache-password' });
  gw = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'cache-merchant',
    UPSTREAM_PASSWORD: 'cache-password',
    REDIS_URL: redis.url,
    PLAN_CACHE_TTL_SECONDS: '30',
    CLIENTS_FILE: writeClientsFile([{ id: 'cache-app', keys: [KEY], scopes: ['plans:read'] }]),
  });
});

afterAll(async () => {
  await gw?.close();
  admin?.disconnect();
  await simulator?.close();
  await redis?.stop();
});

test('a hung Redis costs one timed-out cache read, not one per plan read', async () => {
  const warm = await read();
  expect(warm.status).toBe(200);
  const getsBefore = await redisGets();

  redis.pause();
  try {
    for (let i = 0; i < 5; i++) expect(await read()).toEqual(warm);
  } finally {
    redis.resume();
  }
  await waitFor(async () => (await admin.ping()) === 'PONG', { what: 'Redis resumed' });
  // The reads the gateway sent while Redis hung reach it now: the first found it hung, the rest left it alone.
  expect((await redisGets()) - getsBefore).toBe(1);
});

test('past the pause, one plan read tries the hung Redis again while the reads at the same moment leave it alone', async () => {
  // Redis answers the cache again (an earlier hang's pause is over).
  await waitFor(
    async () => {
      const before = await redisGets();
      expect((await read()).status).toBe(200);
      return (await redisGets()) > before;
    },
    { what: 'the plan cache reading Redis' },
  );
  const getsBefore = await redisGets();
  // Other plans (unknown to the provider: 404): reads of distinct ids are not coalesced, each asks the cache.
  const others = Array.from({ length: 5 }, () => randomUUID());

  redis.pause();
  try {
    expect((await read(others[0])).status).toBe(404);
    await new Promise((resolve) => setTimeout(resolve, RETRY_HUNG_REDIS_MS + 100));
    const statuses = await Promise.all(others.map((id) => read(id).then((answer) => answer.status)));
    expect(statuses).toEqual([404, 404, 404, 404, 404]);
  } finally {
    redis.resume();
  }
  await waitFor(async () => (await admin.ping()) === 'PONG', { what: 'Redis resumed' });
  // The first read found Redis hung; past the pause one read (the probe) asked again, the other four did not.
  expect((await redisGets()) - getsBefore).toBe(2);
});

test('an entry just past its sealed end on a replica whose clock runs ahead is a miss, not counted as forged', async () => {
  const seal = (rejected: { count: number }) =>
    createRecordSeal(createTokenCipher(key), { inc: () => (rejected.count += 1) });
  const key = randomBytes(32);
  const client = admin as unknown as RedisClient;
  const writer = createRedisAnswerCache(client, 'skew-test:', seal({ count: 0 }));
  // A second replica whose clock is a TTL and a few milliseconds ahead: Redis still holds the entry it reads.
  const rejected = { count: 0 };
  const reader = createRedisAnswerCache(client, 'skew-test:', seal(rejected), () => Date.now() + 1_005);
  const answer = { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') };
  await writer.set('plan', answer, 1);
  expect(await writer.get('plan')).toEqual(answer);

  expect(await reader.get('plan')).toBeUndefined();
  expect(rejected.count).toBe(0);
});
