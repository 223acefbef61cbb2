// No answer of the gateway may be kept by a browser, proxy or CDN: every one carries `Cache-Control: no-store`, and
// the caching headers of an upstream that invites caching never reach the caller (real simulator, real Redis).
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const PLAN_PATH = `/api/subscriptions/plan/${PLAN_ID}`;
const MISSING_PLAN_PATH = '/api/subscriptions/plan/00000000-0000-4000-8000-000000000000';
const KEY = 'cache-control-key-0123456789';
const READ_ONLY_KEY = 'cache-control-read-only-0123456789';
const LIMITED_KEY = 'cache-control-limited-0123456789';
const PASSWORD = 'cache-control-password';
const ORIGIN = 'https://app.cache-control.example';
const auth = { 'x-api-key': KEY };
const validBody = { country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } };

/** Headers that let an intermediary keep or revalidate an answer; the simulator's `cachingHeaders` sends them. */
const UPSTREAM_CACHING_HEADERS = ['etag', 'last-modified', 'expires', 'age', 'pragma'];

let redis: RedisServer;
let simulator: RunningSimulator;
let gw: TestGateway;

const postJson = (body: unknown, headers: Record<string, string> = auth): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: typeof body === 'string' ? body : JSON.stringify(body),
});

async function call(base: string, path: string, init: RequestInit = {}) {
  const res = await fetch(base + path, init);
  await res.arrayBuffer();
  return res;
}

/** The answer may not be stored anywhere, and nothing of the upstream's caching advice came through. */
function expectNotCacheable(res: Response, what: string) {
  expect({ what, cacheControl: res.headers.get('cache-control') }).toEqual({
    what,
    cacheControl: 'no-store',
  });
  for (const name of UPSTREAM_CACHING_HEADERS) {
    expect({ what, name, value: res.headers.get(name) }).toEqual({ what, name, value: null });
  }
  expect(res.headers.get('vary') ?? '').not.toMatch(/accept-encoding/i);
}

function envFor(extra: Record<string, string> = {}): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'cache-control-merchant',
    UPSTREAM_PASSWORD: PASSWORD,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: `cache-control-${Math.random().toString(36).slice(2)}:`,
    CORS_ORIGINS: ORIGIN,
    CLIENTS_FILE: clientsFile,
    ...extra,
  };
}

let clientsFile: string;

beforeAll(async () => {
  redis = await startRedisServer();
  simulator = await startSimulator({ port: 0, username: 'cache-control-merchant', password: PASSWORD });
  clientsFile = writeClientsFile([
    { id: 'cache-control-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
    { id: 'cache-control-reader', keys: [READ_ONLY_KEY], scopes: ['plans:read'] },
    {
      id: 'cache-control-limited',
      keys: [LIMITED_KEY],
      scopes: ['plans:read'],
      rateLimit: { limit: 1, windowSeconds: 60 },
    },
  ]);
  gw = await startTestGateway(envFor({ PLAN_CACHE_TTL_SECONDS: '30' }));
});

afterAll(async () => {
  await gw?.close();
  await simulator?.close();
  await redis?.stop();
});

beforeEach(() => {
  simulator.reset();
  simulator.setFaults({ cachingHeaders: true });
});

describe('passed-through upstream answers', () => {
  it('the simulator really sends caching headers (the premise of these tests)', async () => {
    const res = await fetch(`${simulator.url}/api/subscriptions/plan/${PLAN_ID}`);
    expect(res.status).toBe(401);
    expect(res.headers.get('cache-control')).toBe('public, max-age=3600');
    expect(res.headers.get('etag')).toBe('"simulated-etag"');
    expect(res.headers.get('vary')).toMatch(/accept-encoding/i);
  });

  it('a 200 plan, fresh and then from the cache, and its HEAD', async () => {
    const fresh = await call(gw.url, PLAN_PATH, { headers: auth });
    expect(fresh.status).toBe(200);
    expectNotCacheable(fresh, 'plan 200');
    const cached = await call(gw.url, PLAN_PATH, { headers: auth });
    expect(cached.status).toBe(200);
    expectNotCacheable(cached, 'plan 200 from the cache');
    const head = await call(gw.url, PLAN_PATH, { method: 'HEAD', headers: auth });
    expectNotCacheable(head, 'plan HEAD');
    expect(simulator.stats().planReads).toBe(1);
  });

  it('a 404 plan-not-found', async () => {
    const res = await call(gw.url, MISSING_PLAN_PATH, { headers: auth });
    expect(res.status).toBe(404);
    expectNotCacheable(res, 'plan 404');
  });

  it('a 200 document verdict', async () => {
    const res = await call(gw.url, '/api/validation/document', postJson(validBody));
    expect(res.status).toBe(200);
    expectNotCacheable(res, 'validation 200');
  });

  it('an upstream 429 keeps its Retry-After but not its caching headers', async () => {
    // A gateway of its own (its own Redis prefix): the provider's 429 pauses its account for the 5 s, fleet-wide.
    const own = await startTestGateway(envFor());
    try {
      simulator.setFaults({ cachingHeaders: true, errorRate: 1, errorStatus: 429, retryAfterSeconds: 5 });
      const res = await call(own.url, '/api/validation/document', postJson(validBody));
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('5');
      expectNotCacheable(res, 'upstream 429');
    } finally {
      await own.close();
    }
  });

  it('an upstream 5xx (answered 502 by the gateway)', async () => {
    simulator.setFaults({ cachingHeaders: true, errorRate: 1, errorStatus: 500, maxFailures: 1 });
    const res = await call(gw.url, '/api/validation/document', postJson(validBody));
    expect(res.status).toBe(502);
    expectNotCacheable(res, 'upstream 500');
  });
});

describe('gateway-made answers', () => {
  it.each<[string, string, RequestInit, number]>([
    ['400 bad plan id', '/api/subscriptions/plan/not-a-uuid', { headers: auth }, 400],
    ['400 bad body', '/api/validation/document', postJson({ country: 'ARG' }), 400],
    ['401 no key', PLAN_PATH, {}, 401],
    ['401 unknown key', PLAN_PATH, { headers: { 'x-api-key': 'nope-nope-nope' } }, 401],
    [
      '403 missing scope',
      '/api/validation/document',
      postJson(validBody, { 'x-api-key': READ_ONLY_KEY }),
      403,
    ],
    ['404 unknown path', '/api/token/', { headers: auth }, 404],
    ['405 other method', PLAN_PATH, { method: 'DELETE', headers: auth }, 405],
    ['413 big body', '/api/validation/document', postJson({ ...validBody, pad: 'x'.repeat(20_000) }), 413],
    [
      '415 not JSON',
      '/api/validation/document',
      { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: '{}' },
      415,
    ],
    [
      '204 CORS preflight',
      PLAN_PATH,
      { method: 'OPTIONS', headers: { origin: ORIGIN, 'access-control-request-method': 'GET' } },
      204,
    ],
  ])('%s', async (what, path, init, status) => {
    const res = await call(gw.url, path, init);
    expect(res.status).toBe(status);
    expectNotCacheable(res, what);
    expect(simulator.stats().requests).toBe(0);
  });

  it('429 of the rate limiter', async () => {
    const limited = { headers: { 'x-api-key': LIMITED_KEY } };
    expect((await call(gw.url, PLAN_PATH, limited)).status).toBe(200);
    const res = await call(gw.url, PLAN_PATH, limited);
    expect(res.status).toBe(429);
    expectNotCacheable(res, 'rate limit 429');
  });
});

describe('probes and documents', () => {
  it.each(['/healthz', '/readyz', '/metrics', '/openapi.json'])('%s is no-store', async (path) => {
    const res = await call(gw.url, path);
    expect(res.status).toBe(200);
    expectNotCacheable(res, path);
  });

  it('the METRICS_PORT listener answers no-store too, its 404 included', async () => {
    const separate = await startTestGateway(envFor({ METRICS_PORT: '0' }));
    try {
      const metricsUrl = separate.gateway.metricsUrl as string;
      const scrape = await call(metricsUrl, '/metrics');
      expect(scrape.status).toBe(200);
      expectNotCacheable(scrape, 'METRICS_PORT /metrics');
      const other = await call(metricsUrl, '/other');
      expect(other.status).toBe(404);
      expectNotCacheable(other, 'METRICS_PORT 404');
    } finally {
      await separate.close();
    }
  });
});
