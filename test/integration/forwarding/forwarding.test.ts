// The two operations through the real gateway, a real Redis and the simulator as a real HTTP upstream.
import { request as httpRequest } from 'node:http';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const KEY = 'routes-test-key-0123456789';
const READ_ONLY_KEY = 'routes-read-only-key-0123456789';
const PASSWORD = 'routes-upstream-password';
const auth = { 'x-api-key': KEY };
const validBody = { country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } };

let redis: RedisServer;
let simulator: RunningSimulator;
let gw: TestGateway;
let clientsFile: string;

function envFor(sim: RunningSimulator, extra: Record<string, string> = {}): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: sim.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'routes-merchant',
    UPSTREAM_PASSWORD: PASSWORD,
    UPSTREAM_STATIC_HEADERS: 'x-version: LPV3',
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: `routes-${Math.random().toString(36).slice(2)}:`,
    CLIENTS_FILE: clientsFile,
    ...extra,
  };
}

async function call(
  base: string,
  path: string,
  init: RequestInit & { headers?: Record<string, string> } = {},
) {
  const res = await fetch(base + path, init);
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, body: body as Record<string, any>, text };
}

const postJson = (body: unknown, headers: Record<string, string> = auth) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: typeof body === 'string' ? body : JSON.stringify(body),
});

/** A raw request line, for paths that fetch would normalise (dot segments). */
function rawGet(base: string, path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, method: 'GET', headers: auth }, (res) => {
      let body = '';
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  redis = await startRedisServer();
  simulator = await startSimulator({ port: 0, username: 'routes-merchant', password: PASSWORD });
  clientsFile = writeClientsFile([
    { id: 'routes-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
    { id: 'plans-only', keys: [READ_ONLY_KEY], scopes: ['plans:read'] },
  ]);
  gw = await startTestGateway(envFor(simulator));
});

afterAll(async () => {
  await gw?.close();
  await simulator?.close();
  await redis?.stop();
});

beforeEach(() => {
  simulator.reset();
});

describe('GET /api/subscriptions/plan/:internalId', () => {
  it('passes the seed plan through unchanged', async () => {
    const res = await call(gw.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth });
    expect(res.status).toBe(200);
    expect(res.body.internalId).toBe(PLAN_ID);
    expect(res.body.status).toEqual({ code: '100', description: 'ACTIVE', detail: expect.any(String) });
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
  });

  it('accepts upper-case UUIDs', async () => {
    const res = await call(gw.url, `/api/subscriptions/plan/${PLAN_ID.toUpperCase()}`, { headers: auth });
    expect(res.status).toBe(200);
    expect(res.body.internalId).toBe(PLAN_ID);
  });

  it('passes the upstream plan-not-found answer through with its status and body', async () => {
    const res = await call(gw.url, '/api/subscriptions/plan/00000000-0000-4000-8000-000000000000', {
      headers: auth,
    });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      status: { code: '400', description: 'ERROR', detail: 'Plan subscription not found' },
    });
  });

  it('never forwards the query string', async () => {
    const res = await call(gw.url, `/api/subscriptions/plan/${PLAN_ID}?expand=all&token=x`, {
      headers: auth,
    });
    expect(res.status).toBe(200);
    const [received] = simulator.receivedRequests();
    expect(received?.path).toBe(`/api/subscriptions/plan/${PLAN_ID}`);
    expect(received?.query).toEqual({});
  });

  it.each([
    ['not a uuid', '/api/subscriptions/plan/not-a-uuid'],
    ['an encoded traversal', '/api/subscriptions/plan/..%2F..%2Ftoken%2F'],
    ['an encoded slash', `/api/subscriptions/plan/${PLAN_ID.slice(0, 8)}%2F${PLAN_ID.slice(9)}`],
    ['a uuid with trailing junk', `/api/subscriptions/plan/${PLAN_ID}%00`],
  ])('refuses %s with 400 and no upstream call', async (_name, path) => {
    const res = await rawGet(gw.url, path);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).status.description).toBe('INVALID_REQUEST');
    expect(simulator.stats().requests).toBe(0);
  });

  it('answers 404 for dot-segment paths that leave the route, without an upstream call', async () => {
    for (const path of [
      '/api/subscriptions/plan/../../token/',
      '/api/subscriptions/plan/a/b',
      '/api/token/',
    ]) {
      const res = await rawGet(gw.url, path);
      expect(res.status).toBe(404);
    }
    expect(simulator.stats().requests).toBe(0);
    expect(simulator.stats().logins).toBe(0);
  });

  it('shares one upstream call between 100 concurrent identical reads', async () => {
    // A slow upstream keeps the first read in flight while all 100 arrive, even on a loaded CI machine.
    simulator.setFaults({ latencyMs: 1_000 });
    const answers = await Promise.all(
      Array.from({ length: 100 }, () =>
        call(gw.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(100).fill(200));
    expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    expect(simulator.stats().planReads).toBe(1);
  });
});

describe('POST /api/validation/document', () => {
  it('forwards only the three documented fields (unknown fields dropped at every depth)', async () => {
    const res = await call(
      gw.url,
      '/api/validation/document',
      postJson({
        country: 'ARG',
        document: { id: '20-17254359-7', type: 'CUIT', extra: { deep: true } },
        amount: 10,
        ['__proto__']: { polluted: true },
        constructor: { prototype: { polluted: true } },
      }),
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ code: '200', description: 'Valid id and type document' });
    const [received] = simulator.receivedRequests();
    expect(received?.body).toEqual(validBody);
    expect(Object.keys(received?.body as object)).toEqual(['country', 'document']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('passes an invalid-document verdict through', async () => {
    const res = await call(
      gw.url,
      '/api/validation/document',
      postJson({ country: 'BRA', document: { id: '529.982.247-24', type: 'CPF' } }),
    );
    expect(res.status).toBe(200);
    expect(res.body.code).toBe('300');
  });

  it.each([
    ['a formatted CNPJ', { country: 'BRA', document: { id: '11.222.333/0001-81', type: 'CNPJ' } }],
    ['an id with spaces', { country: 'ARG', document: { id: '20 17254359 7', type: 'CUIT' } }],
    ['a Mexican RFC with Ñ', { country: 'MEX', document: { id: 'MUÑO800101AB1', type: 'RFC' } }],
    ['a company RFC with &', { country: 'MEX', document: { id: 'A&A010101AB1', type: 'RFC' } }],
  ])('forwards %s exactly as given, and the provider finds it valid', async (_name, body) => {
    const res = await call(gw.url, '/api/validation/document', postJson(body));
    expect(res.status).toBe(200);
    expect(res.body.code).toBe('200');
    expect(simulator.receivedRequests()[0]?.body).toEqual(body);
  });

  it('refuses an ISO code the provider has no rules for only upstream (code 300), not locally', async () => {
    const body = { country: 'FRA', document: { id: '123456789', type: 'CNI' } };
    const res = await call(gw.url, '/api/validation/document', postJson(body));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ code: '300', description: 'Invalid param + country' });
  });

  it.each([
    ['a lower-case country', { ...validBody, country: 'arg' }, 'country'],
    ['a missing document', { country: 'ARG' }, 'document'],
    ['a number id', { country: 'ARG', document: { id: 20172543597, type: 'CUIT' } }, 'document.id'],
    ['an empty type', { country: 'ARG', document: { id: '1', type: '' } }, 'document.type'],
    [
      'a control character',
      { country: 'ARG', document: { id: '20\n17254359', type: 'CUIT' } },
      'document.id',
    ],
    ['a huge id', { country: 'ARG', document: { id: '9'.repeat(33), type: 'CUIT' } }, 'document.id'],
    ['a country typo', { ...validBody, country: 'ARQ' }, 'country'],
    ['a country that does not exist', { ...validBody, country: 'XXX' }, 'country'],
    ['an alpha-2 country', { ...validBody, country: 'AR' }, 'country'],
    [
      'full-width digits',
      { country: 'ARG', document: { id: '２０-17254359-7', type: 'CUIT' } },
      'document.id',
    ],
    [
      'Arabic-Indic digits',
      { country: 'ARG', document: { id: '٢٠-17254359-7', type: 'CUIT' } },
      'document.id',
    ],
    [
      'a bidi override',
      { country: 'ARG', document: { id: '20-\u202e17254359-7', type: 'CUIT' } },
      'document.id',
    ],
    [
      'a zero-width space',
      { country: 'ARG', document: { id: '20-1725\u200b4359-7', type: 'CUIT' } },
      'document.id',
    ],
    [
      'a combining tilde',
      { country: 'MEX', document: { id: 'MUN\u0303O800101AB1', type: 'RFC' } },
      'document.id',
    ],
    ['a leading space', { country: 'ARG', document: { id: ' 20-17254359-7', type: 'CUIT' } }, 'document.id'],
    ['a trailing dash', { country: 'ARG', document: { id: '20-17254359-', type: 'CUIT' } }, 'document.id'],
    ['other punctuation', { country: 'ARG', document: { id: '20_17254359_7', type: 'CUIT' } }, 'document.id'],
    [
      'a lower-case type',
      { country: 'ARG', document: { id: '20-17254359-7', type: 'cuit' } },
      'document.type',
    ],
    [
      'a Cyrillic look-alike in the type',
      { country: 'ARG', document: { id: '1', type: 'CUI\u0422' } },
      'document.type',
    ],
    ['a space in the type', { country: 'ARG', document: { id: '1', type: 'CUIT ' } }, 'document.type'],
    ['an array body', [validBody], ''],
  ])('refuses %s with 400 naming the path, and no upstream call', async (_name, body, path) => {
    const res = await call(gw.url, '/api/validation/document', postJson(body));
    expect(res.status).toBe(400);
    expect(res.body.status).toEqual({
      code: '400',
      description: 'INVALID_REQUEST',
      detail: expect.any(String),
    });
    expect(res.body.errors.map((e: { path: string }) => e.path)).toContain(path);
    expect(res.body.requestId).toBe(res.headers.get('x-request-id'));
    expect(simulator.stats().requests).toBe(0);
  });

  it('names every bad path at once', async () => {
    const res = await call(
      gw.url,
      '/api/validation/document',
      postJson({ country: 1, document: { id: '', type: 2 } }),
    );
    expect(res.body.errors.map((e: { path: string }) => e.path).sort()).toEqual(
      ['country', 'document.id', 'document.type'].sort(),
    );
  });

  it('refuses other content types (415), big bodies (413) and broken JSON (400) without an upstream call', async () => {
    const text = await call(gw.url, '/api/validation/document', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'text/plain' },
      body: JSON.stringify(validBody),
    });
    expect(text.status).toBe(415);
    expect(text.body.status.description).toBe('UNSUPPORTED_MEDIA_TYPE');
    const big = await call(
      gw.url,
      '/api/validation/document',
      postJson({ ...validBody, padding: 'x'.repeat(17 * 1024) }),
    );
    expect(big.status).toBe(413);
    expect(big.body.status.description).toBe('PAYLOAD_TOO_LARGE');
    const broken = await call(gw.url, '/api/validation/document', postJson('{"country":'));
    expect(broken.status).toBe(400);
    expect(simulator.stats().requests).toBe(0);
  });
});

describe('header hygiene', () => {
  it('sends the upstream only the allow-list plus its own token and the static headers', async () => {
    const res = await call(gw.url, '/api/validation/document', {
      ...postJson(validBody, {
        ...auth,
        authorization: 'Bearer caller-sso-token',
        cookie: 'session=caller-cookie',
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-host': 'evil.example',
        'x-real-ip': '6.6.6.6',
        'x-request-id': 'trace-abc-123',
        'x-custom': 'nope',
      }),
    });
    expect(res.status).toBe(200);
    const headers = simulator.receivedRequests()[0]?.headers ?? {};
    expect(headers.authorization).toMatch(/^Bearer eyJ/);
    expect(headers.authorization).not.toContain('caller-sso-token');
    expect(headers['x-api-key']).toBeUndefined();
    expect(headers.cookie).toBeUndefined();
    expect(headers['x-custom']).toBeUndefined();
    expect(headers['x-real-ip']).toBeUndefined();
    expect(Object.keys(headers).filter((h) => h.startsWith('x-forwarded'))).toEqual([]);
    expect(headers['x-request-id']).toBe('trace-abc-123');
    expect(headers['x-version']).toBe('LPV3');
    expect(headers['content-type']).toBe('application/json');
  });

  it('drops upstream internals from the answer and returns the request id', async () => {
    const res = await call(gw.url, `/api/subscriptions/plan/${PLAN_ID}`, {
      headers: { ...auth, 'x-request-id': 'trace-xyz' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(res.headers.get('server')).toBeNull();
    expect(res.headers.get('x-powered-by')).toBeNull();
    expect(res.headers.get('x-request-id')).toBe('trace-xyz');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.text).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
  });
});

describe('routing', () => {
  it('answers 405 with Allow for other methods on the two paths', async () => {
    const put = await call(gw.url, `/api/subscriptions/plan/${PLAN_ID}`, { method: 'DELETE', headers: auth });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD');
    const get = await call(gw.url, '/api/validation/document', { headers: auth });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(get.body.status.description).toBe('METHOD_NOT_ALLOWED');
  });

  it('answers 405 with Allow on the probe and document paths too', async () => {
    for (const path of ['/healthz', '/readyz', '/openapi.json', '/metrics']) {
      const res = await call(gw.url, path, { method: 'POST' });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
    }
  });

  it('is not an open proxy: other upstream paths are 404', async () => {
    for (const path of [
      '/api/token/',
      '/api/token/refresh/',
      '/api/subscriptions',
      '/__simulator/stats',
      '/',
    ]) {
      const res = await call(gw.url, path, { headers: auth });
      expect(res.status).toBe(404);
      expect(res.body.status.description).toBe('NOT_FOUND');
    }
    expect(simulator.stats().requests).toBe(0);
  });

  it('checks the route scope before forwarding', async () => {
    const res = await call(
      gw.url,
      '/api/validation/document',
      postJson(validBody, { 'x-api-key': READ_ONLY_KEY }),
    );
    expect(res.status).toBe(403);
    expect(res.body.status.description).toBe('CLIENT_FORBIDDEN');
    expect(simulator.stats().requests).toBe(0);
  });
});

describe('upstream failures', () => {
  it('renews a revoked token once and retries the call: the caller sees 200', async () => {
    await call(gw.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth });
    simulator.reset();
    simulator.revokeTokens();
    const res = await call(gw.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth });
    expect(res.status).toBe(200);
    const stats = simulator.stats();
    expect(stats.unauthorized).toBe(1);
    expect(stats.logins + stats.refreshes).toBeGreaterThanOrEqual(1);
    expect(stats.planReads).toBe(1);
  });

  it('passes an upstream 429 through with its Retry-After, then pauses the account (503 UPSTREAM_RATE_LIMITED)', async () => {
    // A gateway of its own (its own Redis prefix): the pause is the account's, fleet-wide, for the 7 s.
    const sim = await startSimulator({ port: 0, username: 'routes-merchant', password: PASSWORD });
    const gateway = await startTestGateway(envFor(sim));
    try {
      sim.setFaults({ errorRate: 1, errorStatus: 429, retryAfterSeconds: 7 });
      const res = await call(gateway.url, '/api/validation/document', postJson(validBody));
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
      sim.setFaults({});
      const paused = await call(gateway.url, '/api/validation/document', postJson(validBody));
      expect(paused.status).toBe(503);
      expect(paused.body.status.description).toBe('UPSTREAM_RATE_LIMITED');
      expect(Number(paused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(sim.stats().validations).toBe(0);
    } finally {
      await gateway.close();
      await sim.close();
    }
  });

  it('maps an upstream 5xx to 502 UPSTREAM_UNAVAILABLE', async () => {
    simulator.setFaults({ errorRate: 1, errorStatus: 500, maxFailures: 1 });
    const res = await call(gw.url, '/api/validation/document', postJson(validBody));
    expect(res.status).toBe(502);
    expect(res.body.status.description).toBe('UPSTREAM_UNAVAILABLE');
    expect(res.text).not.toContain('Simulated');
  });

  it('retries the idempotent GET once on a connection reset, never the POST', async () => {
    simulator.setFaults({ resetConnections: true, maxFailures: 1 });
    const get = await call(gw.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth });
    expect(get.status).toBe(200);
    expect(simulator.stats().faultsInjected).toBe(1);
    simulator.reset();
    simulator.setFaults({ resetConnections: true, maxFailures: 1 });
    const post = await call(gw.url, '/api/validation/document', postJson(validBody));
    expect(post.status).toBe(502);
    expect(post.body.status.description).toBe('UPSTREAM_UNAVAILABLE');
    expect(simulator.stats().validations).toBe(0);
  });
});

describe('timeouts and the circuit breaker', () => {
  let sim: RunningSimulator;
  let gateway: TestGateway;
  beforeAll(async () => {
    sim = await startSimulator({ port: 0, username: 'routes-merchant', password: PASSWORD });
    gateway = await startTestGateway(
      envFor(sim, {
        UPSTREAM_TIMEOUT_MS: '300',
        CIRCUIT_FAILURE_RATIO: '0.5',
        CIRCUIT_MINIMUM_CALLS: '6',
        CIRCUIT_WINDOW_MS: '60000',
        CIRCUIT_RESET_MS: '800',
      }),
    );
    // warm the token so token calls do not count
    expect((await call(gateway.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth })).status).toBe(
      200,
    );
  });
  afterAll(async () => {
    await gateway?.close();
    await sim?.close();
  });

  it('answers 504 UPSTREAM_TIMEOUT when the upstream is slower than UPSTREAM_TIMEOUT_MS', async () => {
    sim.setFaults({ latencyMs: 1_000, maxFailures: 1 });
    const started = Date.now();
    const res = await call(gateway.url, '/api/validation/document', postJson(validBody));
    expect(res.status).toBe(504);
    expect(res.body.status.description).toBe('UPSTREAM_TIMEOUT');
    expect(Date.now() - started).toBeLessThan(1_000);
    sim.setFaults({});
  });

  it('opens on the failure ratio, answers 503 with Retry-After without calling, and closes after a probe', async () => {
    sim.setFaults({});
    expect((await call(gateway.url, '/api/validation/document', postJson(validBody))).status).toBe(200);
    sim.reset();
    sim.setFaults({ errorRate: 1, errorStatus: 503 });
    // The window holds the timeout above (a failure) and one success: the 4th failure makes 6 calls, 5 failed.
    for (let i = 0; i < 4; i++) {
      expect((await call(gateway.url, '/api/validation/document', postJson(validBody))).status).toBe(502);
    }
    const callsBefore = sim.stats().requests;
    const open = await call(gateway.url, '/api/validation/document', postJson(validBody));
    expect(open.status).toBe(503);
    expect(open.body.status.description).toBe('UPSTREAM_UNAVAILABLE');
    expect(Number(open.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(sim.stats().requests).toBe(callsBefore);

    sim.setFaults({});
    await new Promise((r) => setTimeout(r, 900));
    expect((await call(gateway.url, '/api/validation/document', postJson(validBody))).status).toBe(200);
    expect((await call(gateway.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth })).status).toBe(
      200,
    );
  });
});

describe('the upstream timeout starts once a socket is held', () => {
  it('does not count the (separately bounded) wait for the only socket against UPSTREAM_TIMEOUT_MS', async () => {
    const sim = await startSimulator({ port: 0, username: 'routes-merchant', password: PASSWORD });
    const gateway = await startTestGateway(
      envFor(sim, {
        UPSTREAM_MAX_SOCKETS: '1',
        UPSTREAM_TIMEOUT_MS: '600',
        UPSTREAM_QUEUE_TIMEOUT_MS: '5000',
        CIRCUIT_MINIMUM_CALLS: '100',
      }),
    );
    try {
      expect((await call(gateway.url, '/api/validation/document', postJson(validBody))).status).toBe(200);
      // Each call takes 400 ms upstream; the second waits ~400 ms for the socket first, 800 ms in all (> 600).
      sim.setFaults({ latencyMs: 400 });
      const statuses = await Promise.all(
        Array.from(
          { length: 2 },
          async () => (await call(gateway.url, '/api/validation/document', postJson(validBody))).status,
        ),
      );
      expect(statuses).toEqual([200, 200]);
    } finally {
      await gateway.close();
      await sim.close();
    }
  });
});

describe('upstream refusals of the gateway itself', () => {
  it('maps refused credentials to 502 UPSTREAM_AUTH_FAILED', async () => {
    const sim = await startSimulator({ port: 0, username: 'routes-merchant', password: 'another-password' });
    const gateway = await startTestGateway(envFor(sim));
    try {
      const res = await call(gateway.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth });
      expect(res.status).toBe(502);
      expect(res.body.status.description).toBe('UPSTREAM_AUTH_FAILED');
      expect(res.text).not.toContain(PASSWORD);
    } finally {
      await gateway.close();
      await sim.close();
    }
  });

  it('maps a refused IP to 502 UPSTREAM_IP_NOT_WHITELISTED telling the operator to whitelist', async () => {
    const sim = await startSimulator({
      port: 0,
      username: 'routes-merchant',
      password: PASSWORD,
      allowedIps: ['10.9.9.9'],
    });
    const gateway = await startTestGateway(envFor(sim));
    try {
      const res = await call(gateway.url, '/api/validation/document', postJson(validBody));
      expect(res.status).toBe(502);
      expect(res.body.status.description).toBe('UPSTREAM_IP_NOT_WHITELISTED');
      expect(res.body.status.detail).toMatch(/whitelist/i);
      expect(sim.stats().validations).toBe(0);
    } finally {
      await gateway.close();
      await sim.close();
    }
  });
});

describe('upstream address', () => {
  it('reaches an upstream at an IPv6 literal (http://[::1]:port) for both operations', async () => {
    const sim = await startSimulator({
      port: 0,
      host: '::1',
      username: 'routes-merchant',
      password: PASSWORD,
    });
    expect(sim.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    const gateway = await startTestGateway(envFor(sim));
    try {
      const plan = await call(gateway.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth });
      expect(plan.status).toBe(200);
      expect(plan.body.internalId).toBe(PLAN_ID);
      const verdict = await call(gateway.url, '/api/validation/document', postJson(validBody));
      expect(verdict.status).toBe(200);
      expect(sim.stats()).toMatchObject({ planReads: 1, validations: 1 });
    } finally {
      await gateway.close();
      await sim.close();
    }
  });
});

describe('plan cache (PLAN_CACHE_TTL_SECONDS)', () => {
  it('serves repeated reads from the Redis-shared cache across two gateways', async () => {
    const sim = await startSimulator({ port: 0, username: 'routes-merchant', password: PASSWORD });
    const prefix = `cache-${Date.now()}:`;
    const env = envFor(sim, { PLAN_CACHE_TTL_SECONDS: '30', REDIS_KEY_PREFIX: prefix });
    const first = await startTestGateway(env);
    const second = await startTestGateway(env);
    try {
      expect((await call(first.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth })).status).toBe(
        200,
      );
      await new Promise((r) => setTimeout(r, 50));
      const cached = await call(second.url, `/api/subscriptions/plan/${PLAN_ID}`, { headers: auth });
      expect(cached.status).toBe(200);
      expect(cached.body.internalId).toBe(PLAN_ID);
      expect(sim.stats().planReads).toBe(1);
    } finally {
      await first.close();
      await second.close();
      await sim.close();
    }
  });
});

describe('logs', () => {
  it('never contain the upstream password, the API key or a JWT', () => {
    const logs = gw.logs();
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toContain(PASSWORD);
    expect(logs).not.toContain(KEY);
    expect(logs).not.toMatch(/eyJ[\w-]+\.[\w-]+/);
    expect(logs).not.toContain('17254359');
  });

  it('carry one line per request with route, status, client, latency and upstream latency', () => {
    const line = gw
      .logs()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((entry) => entry.msg === 'request' && entry.route === 'plan' && entry.status === 200);
    expect(line).toMatchObject({ client: 'routes-app', method: 'GET', requestId: expect.any(String) });
    expect(line.latencyMs).toEqual(expect.any(Number));
    expect(line.upstreamMs).toEqual(expect.any(Number));
    expect(['memory', 'redis', 'upstream']).toContain(line.tokenSource);
  });
});
