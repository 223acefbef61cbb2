// Browser sessions while the shared store (a real Redis) is down: 503 with Retry-After, never a 500, never trusted.
import { SESSION_COOKIE } from '../../../src/sessions/cookies';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { CookieJar, login, request } from '../../support/oidc-browser';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const ajax = { 'x-csrf': '1' };

let redis: RedisServer;
let gateway: TestGateway;

beforeAll(async () => {
  redis = await startRedisServer();
  gateway = await startTestGateway({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: `outage-${Date.now()}:` });
}, 30_000);
afterAll(async () => {
  await gateway?.close();
  await redis?.stop();
});

test('Redis down: session calls and logins are 503 with Retry-After (API keys still pass); back up, the lost session is a 401', async () => {
  const provider = gateway.gateway.identityProvider;
  if (!provider) throw new Error('no development provider');
  const jar = new CookieJar();
  expect((await login(jar, gateway.url, provider)).status).toBe(303);
  expect((await request(jar, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(200);

  await redis.kill();
  for (const path of [PLAN, '/bff/user']) {
    const answer = await request(jar, `${gateway.url}${path}`, { headers: ajax });
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('1');
    expect(JSON.parse(answer.body).status.description).toBe('UPSTREAM_UNAVAILABLE');
  }
  // The cookie is kept: the session may well still exist once the store answers again.
  expect(jar.get(gateway.url, SESSION_COOKIE)).toBeDefined();
  expect((await request(new CookieJar(), `${gateway.url}/bff/login`)).status).toBe(503);
  const keyed = await fetch(`${gateway.url}${PLAN}`, { headers: { 'x-api-key': 'local-dev-key' } });
  expect(keyed.status).toBe(200);

  // An empty Redis comes back: that session is gone, and says so.
  await redis.restart();
  let status = 0;
  for (let attempt = 0; attempt < 50 && status !== 401; attempt++) {
    status = (await request(jar, `${gateway.url}${PLAN}`, { headers: ajax })).status;
    if (status !== 401) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(status).toBe(401);
}, 30_000);
