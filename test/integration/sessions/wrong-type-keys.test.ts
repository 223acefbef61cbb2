// Browser-session records and pending logins replaced by a key of another type (a hash, list, set, stream) by
// whoever can write Redis: a record that is not ours (ignored, counted), never a store outage (503, Redis down).
import { Redis } from 'ioredis';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { CookieJar, login, loginUntilCallback, request } from '../../support/oidc-browser';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const ajax = { 'x-csrf': '1' };
const PREFIX = `wrongtype-${Date.now()}:`;

const WRONG_TYPES: [string, (key: string) => Promise<unknown>][] = [
  ['a hash', (key) => admin.hset(key, 'field', 'value')],
  ['a list', (key) => admin.rpush(key, 'value')],
  ['a set', (key) => admin.sadd(key, 'value')],
  ['a stream', (key) => admin.xadd(key, '*', 'field', 'value')],
];

let redis: RedisServer;
let admin: Redis;
let gateway: TestGateway;

beforeAll(async () => {
  redis = await startRedisServer();
  admin = new Redis(redis.url);
  gateway = await startTestGateway({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: PREFIX });
}, 30_000);
afterAll(async () => {
  await gateway?.close();
  admin?.disconnect();
  await redis?.stop();
});

async function metric(name: string, labels = ''): Promise<number> {
  const text = await gateway.gateway.metrics.registry.getSingleMetricAsString(name);
  return Number(new RegExp(`^${name}${labels.replace(/[{}]/g, '\\$&')} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
}

/** The keys under `pattern` that appeared while `run` ran. */
async function keysMadeBy(pattern: string, run: () => Promise<unknown>): Promise<string[]> {
  const before = new Set(await admin.keys(PREFIX + pattern));
  await run();
  return (await admin.keys(PREFIX + pattern)).filter((key) => !before.has(key));
}

function provider() {
  const found = gateway.gateway.identityProvider;
  if (!found) throw new Error('no development provider');
  return found;
}

test.each(WRONG_TYPES)(
  '%s at a session record: the session is unknown (401, not 503), counted, Redis healthy; a new login works',
  async (_name, write) => {
    const jar = new CookieJar();
    const made = await keysMadeBy('session:{*', async () => {
      expect((await login(jar, gateway.url, provider())).status).toBe(303);
    });
    expect((await request(jar, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(200);
    const counted = await metric('store_records_rejected_total', '{kind="session"}');
    for (const key of made) {
      await admin.del(key);
      await write(key);
    }

    expect((await request(jar, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(401);
    expect(await metric('store_records_rejected_total', '{kind="session"}')).toBeGreaterThan(counted);
    expect(await metric('token_store_healthy')).toBe(1);
    expect(gateway.logs()).not.toContain('redis unreachable');

    const fresh = new CookieJar();
    expect((await login(fresh, gateway.url, provider())).status).toBe(303);
    expect((await request(fresh, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(200);
  },
);

test.each(WRONG_TYPES)(
  '%s at a pending login: the callback is refused as an unknown login (4xx, not 503), counted, Redis healthy',
  async (_name, write) => {
    const jar = new CookieJar();
    let callbackUrl = '';
    const made = await keysMadeBy('session-login:*', async () => {
      ({ callbackUrl } = await loginUntilCallback(jar, gateway.url, provider()));
    });
    expect(made).toHaveLength(1);
    await admin.del(made[0]);
    await write(made[0]);
    const counted = await metric('store_records_rejected_total', '{kind="login_state"}');

    const answer = await request(jar, callbackUrl);
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.status).toBeLessThan(500);
    expect(await metric('store_records_rejected_total', '{kind="login_state"}')).toBeGreaterThan(counted);
    expect(await metric('token_store_healthy')).toBe(1);
    expect(gateway.logs()).not.toContain('redis unreachable');
    // The callback's compare-and-delete took the foreign key away: the next login under that name starts clean.
    expect(await admin.exists(made[0])).toBe(0);
  },
);
