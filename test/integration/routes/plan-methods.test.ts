// The upstream only ever sees each route's own method: HEAD, OPTIONS and method-override headers cannot change what
// the provider is asked, and a HEAD can never leave an empty plan for a GET (coalescing, memory and Redis cache).
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const PLAN_PATH = `/api/subscriptions/plan/${PLAN_ID}`;
const KEY = 'plan-methods-key-0123456789';
const PASSWORD = 'plan-methods-password';
const auth = { 'x-api-key': KEY };
const validBody = { country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } };

let redis: RedisServer;
let simulator: RunningSimulator;
let clientsFile: string;
/** The full plan as the simulator serves it to a GET. */
let fullPlan: string;

function envFor(extra: Record<string, string> = {}): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'plan-methods-merchant',
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
    ...extra,
  };
}

async function call(base: string, path: string, init: RequestInit = {}) {
  const res = await fetch(base + path, init);
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const head = (base: string) => call(base, PLAN_PATH, { method: 'HEAD', headers: auth });
const get = (base: string) => call(base, PLAN_PATH, { headers: auth });
const upstreamMethods = () => simulator.receivedRequests().map((r) => r.method);

/** A HEAD, then a GET while the HEAD's upstream call is still in flight (the simulator holds it `latencyMs`). */
async function headRacingGet(base: string) {
  simulator.setFaults({ latencyMs: 600 });
  const headAnswer = head(base);
  // The simulator logs a request before its injected latency: the HEAD leads the read in flight.
  await waitFor(() => simulator.receivedRequests().length === 1, { what: 'the leading read upstream' });
  const getAnswer = get(base);
  return { head: await headAnswer, get: await getAnswer };
}

beforeAll(async () => {
  redis = await startRedisServer();
  simulator = await startSimulator({ port: 0, username: 'plan-methods-merchant', password: PASSWORD });
  clientsFile = writeClientsFile([
    { id: 'plan-methods-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
  ]);
  const gateway = await startTestGateway(envFor());
  try {
    fullPlan = (await get(gateway.url)).text;
  } finally {
    await gateway.close();
  }
  expect(JSON.parse(fullPlan).internalId).toBe(PLAN_ID);
});

afterAll(async () => {
  await simulator?.close();
  await redis?.stop();
});

beforeEach(() => simulator.reset());

describe('HEAD on the plan route, without a cache', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway(envFor());
  });
  afterAll(() => gw?.close());

  it('HEAD alone: the GET answer without its body; the upstream is asked with GET', async () => {
    const res = await head(gw.url);
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(fullPlan));
    expect(upstreamMethods()).toEqual(['GET']);
    expect(simulator.stats().planReads).toBe(1);
  });

  it('HEAD racing a GET: one upstream GET, shared, and the GET carries the full plan', async () => {
    const { head: headRes, get: getRes } = await headRacingGet(gw.url);
    expect(headRes.status).toBe(200);
    expect(headRes.text).toBe('');
    expect(getRes.status).toBe(200);
    expect(getRes.text).toBe(fullPlan);
    expect(upstreamMethods()).toEqual(['GET']);
    expect(simulator.stats().planReads).toBe(1);
  });

  it('GET racing a HEAD: the HEAD follower gets the headers, the GET the plan', async () => {
    simulator.setFaults({ latencyMs: 600 });
    const getAnswer = get(gw.url);
    await waitFor(() => simulator.receivedRequests().length === 1, { what: 'the leading read upstream' });
    const headRes = await head(gw.url);
    const getRes = await getAnswer;
    expect(getRes.text).toBe(fullPlan);
    expect(headRes.status).toBe(200);
    expect(headRes.text).toBe('');
    expect(upstreamMethods()).toEqual(['GET']);
  });

  it('each HEAD, leader or follower, keeps its own method in the request log', () => {
    const lines = gw
      .logs()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line))
      .filter((entry) => entry.msg === 'request' && entry.route === 'plan');
    // The three HEADs above: alone, leading a GET, following a GET.
    expect(lines.filter((entry) => entry.method === 'HEAD')).toHaveLength(3);
    expect(lines.filter((entry) => entry.method === 'GET')).toHaveLength(2);
  });
});

describe.each([
  ['memory', () => ({})],
  ['Redis', () => ({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: `plan-methods-${Date.now()}:` })],
])('HEAD then GET with the plan cache on (%s)', (_kind, storeEnv) => {
  let gw: TestGateway;
  beforeEach(async () => {
    // A fresh gateway (and Redis namespace) per test: every test starts with an empty cache.
    gw = await startTestGateway(envFor({ PLAN_CACHE_TTL_SECONDS: '30', ...storeEnv() }));
  });
  afterEach(() => gw?.close());

  it('a HEAD first: later GETs get the full plan (from the cache)', async () => {
    expect((await head(gw.url)).text).toBe('');
    for (let i = 0; i < 3; i++) {
      const res = await get(gw.url);
      expect(res.status).toBe(200);
      expect(res.text).toBe(fullPlan);
    }
    expect(upstreamMethods()).toEqual(['GET']);
    expect(simulator.stats().planReads).toBe(1);
  });

  it('a HEAD racing a GET: both, and every later GET, served from one upstream GET with the full plan', async () => {
    const raced = await headRacingGet(gw.url);
    expect(raced.get.text).toBe(fullPlan);
    simulator.setFaults({});
    expect((await get(gw.url)).text).toBe(fullPlan);
    expect((await head(gw.url)).text).toBe('');
    expect(upstreamMethods()).toEqual(['GET']);
    expect(simulator.stats().planReads).toBe(1);
  });

  it('a body cut short upstream is a 502, never cached: the next GET reads the full plan again', async () => {
    // Two: the GET's connection-error retry is cut short too.
    simulator.setFaults({ truncateBodies: true, maxFailures: 2 });
    const cut = await get(gw.url);
    expect(cut.status).toBe(502);
    expect(JSON.parse(cut.text).status.description).toBe('UPSTREAM_UNAVAILABLE');
    expect((await head(gw.url)).status).toBe(200);
    expect((await get(gw.url)).text).toBe(fullPlan);
    expect(simulator.stats()).toMatchObject({ planReads: 3, faultsInjected: 2 });
  });
});

describe('other methods and method overrides never reach the upstream as such', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway(envFor());
  });
  afterAll(() => gw?.close());

  it.each(['OPTIONS', 'PUT', 'PATCH', 'DELETE', 'POST'])(
    '%s on the plan route is 405 without an upstream call',
    async (method) => {
      const res = await call(gw.url, PLAN_PATH, { method, headers: auth });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
      expect(simulator.stats().requests).toBe(0);
    },
  );

  it.each(['OPTIONS', 'PUT', 'GET', 'HEAD', 'DELETE'])(
    '%s on the document route is 405 without an upstream call',
    async (method) => {
      const res = await call(gw.url, '/api/validation/document', { method, headers: auth });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      expect(simulator.stats().requests).toBe(0);
    },
  );

  it.each(['x-http-method-override', 'x-http-method', 'x-method-override'])(
    'a GET with %s: DELETE is a GET upstream, without the header',
    async (header) => {
      const res = await call(gw.url, PLAN_PATH, { headers: { ...auth, [header]: 'DELETE' } });
      expect(res.text).toBe(fullPlan);
      const [received] = simulator.receivedRequests();
      expect(received?.method).toBe('GET');
      expect(received?.headers[header]).toBeUndefined();
    },
  );

  it.each(['x-http-method-override', 'x-http-method', 'x-method-override'])(
    'a POST with %s: GET is a POST upstream, without the header',
    async (header) => {
      const res = await call(gw.url, '/api/validation/document', {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', [header]: 'GET' },
        body: JSON.stringify(validBody),
      });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.text).code).toBe('200');
      const [received] = simulator.receivedRequests();
      expect(received?.method).toBe('POST');
      expect(received?.headers[header]).toBeUndefined();
    },
  );
});
