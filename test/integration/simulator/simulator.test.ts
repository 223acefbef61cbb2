import { decodeJwt } from 'jose';
import request from 'supertest';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';

const CREDENTIALS = { username: 'sandbox-merchant', password: 'sandbox-password' };
const SEED_PLAN = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const VALID_CUIT = { country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } };

const ACCESS_NOT_VALID = {
  detail: 'Given token not valid for any token type',
  code: 'token_not_valid',
  messages: [{ token_class: 'AccessToken', token_type: 'access', message: 'Token is invalid or expired' }],
};
const REFRESH_NOT_VALID = { detail: 'Token is invalid or expired', code: 'token_not_valid' };

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

async function call(
  sim: RunningSimulator,
  method: string,
  path: string,
  { body, headers = {} }: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

async function login(sim: RunningSimulator): Promise<{ access: string; refresh: string }> {
  const res = await call(sim, 'POST', '/api/token/', { body: CREDENTIALS });
  expect(res.status).toBe(200);
  return res.body as { access: string; refresh: string };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

function validateWith(sim: RunningSimulator, token: string, body: unknown = VALID_CUIT) {
  return call(sim, 'POST', '/api/validation/document', { body, headers: bearer(token) });
}

function readPlan(sim: RunningSimulator, token: string, id = SEED_PLAN) {
  return call(sim, 'GET', `/api/subscriptions/plan/${id}`, { headers: bearer(token) });
}

describe('payment API simulator (default settings, real HTTP)', () => {
  let sim: RunningSimulator;

  beforeAll(async () => {
    sim = await startSimulator({ port: 0 });
  });
  afterAll(async () => {
    await sim.close();
  });
  beforeEach(() => {
    sim.reset();
  });

  it('listens on an ephemeral loopback port', () => {
    expect(sim.port).toBeGreaterThan(0);
    expect(sim.url).toBe(`http://127.0.0.1:${sim.port}`);
  });

  describe('POST /api/token/', () => {
    it('issues a simplejwt pair with the provider lifetimes (5 min / 24 h)', async () => {
      const { access, refresh } = await login(sim);
      const a = decodeJwt(access);
      const r = decodeJwt(refresh);
      expect(a.token_type).toBe('access');
      expect(r.token_type).toBe('refresh');
      expect(a.exp! - a.iat!).toBe(300);
      expect(r.exp! - r.iat!).toBe(86_400);
      for (const claims of [a, r]) {
        expect(typeof claims.jti).toBe('string');
        expect(claims.user_id).toBe(1);
        expect(Math.abs(claims.iat! - Date.now() / 1000)).toBeLessThan(5);
      }
      expect(a.jti).not.toBe(r.jti);
    });

    it('refuses bad credentials with the simplejwt body', async () => {
      const res = await call(sim, 'POST', '/api/token/', { body: { ...CREDENTIALS, password: 'wrong' } });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ detail: 'No active account found with the given credentials' });
      expect(sim.stats()).toMatchObject({ logins: 0, loginFailures: 1 });
    });

    it('answers 400 per missing field', async () => {
      const res = await call(sim, 'POST', '/api/token/', { body: { username: 'sandbox-merchant' } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ password: ['This field is required.'] });
      const both = await call(sim, 'POST', '/api/token/', { body: {} });
      expect(both.body).toEqual({
        username: ['This field is required.'],
        password: ['This field is required.'],
      });
      const blank = await call(sim, 'POST', '/api/token/', { body: { username: '', password: null } });
      expect(blank.body).toEqual({
        username: ['This field may not be blank.'],
        password: ['This field may not be null.'],
      });
    });

    it('routes by exact path, like the provider', async () => {
      expect((await call(sim, 'POST', '/api/token', { body: CREDENTIALS })).status).toBe(404);
      const get = await call(sim, 'GET', '/api/token/');
      expect(get.status).toBe(405);
      expect(get.headers.get('allow')).toBe('POST');
      expect((await call(sim, 'GET', '/api/other')).body).toEqual({ detail: 'Not found.' });
    });
  });

  describe('POST /api/token/refresh/ without rotation', () => {
    it('returns a new access token and no refresh token', async () => {
      const pair = await login(sim);
      const res = await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: pair.refresh } });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body as object)).toEqual(['access']);
      const { access } = res.body as { access: string };
      expect(decodeJwt(access).token_type).toBe('access');
      expect((await validateWith(sim, access)).status).toBe(200);
      // The same refresh token keeps working.
      expect(
        (await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: pair.refresh } })).status,
      ).toBe(200);
      expect(sim.stats()).toMatchObject({ logins: 1, refreshes: 2, refreshFailures: 0 });
    });

    it('refuses an access token given as refresh token', async () => {
      const { access } = await login(sim);
      const res = await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: access } });
      expect(res.status).toBe(401);
      expect(res.body).toEqual(REFRESH_NOT_VALID);
      expect(sim.stats().refreshFailures).toBe(1);
    });

    it('refuses garbage and a missing field', async () => {
      const res = await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: 'a.b.c' } });
      expect(res.status).toBe(401);
      expect(res.body).toEqual(REFRESH_NOT_VALID);
      const missing = await call(sim, 'POST', '/api/token/refresh/', { body: {} });
      expect(missing.status).toBe(400);
      expect(missing.body).toEqual({ refresh: ['This field is required.'] });
    });
  });

  describe('bearer authentication on the operations', () => {
    it('answers 401 "not provided" without an Authorization header', async () => {
      for (const res of [
        await call(sim, 'POST', '/api/validation/document', { body: VALID_CUIT }),
        await call(sim, 'GET', `/api/subscriptions/plan/${SEED_PLAN}`),
        await call(sim, 'GET', `/api/subscriptions/plan/${SEED_PLAN}`, {
          headers: { authorization: 'Basic abc' },
        }),
      ]) {
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ detail: 'Authentication credentials were not provided.' });
        expect(res.headers.get('www-authenticate')).toBe('Bearer realm="api"');
      }
      expect(sim.stats()).toMatchObject({ unauthorized: 3, validations: 0, planReads: 0 });
    });

    it('refuses a refresh token used as access token', async () => {
      const { refresh } = await login(sim);
      const res = await readPlan(sim, refresh);
      expect(res.status).toBe(401);
      expect(res.body).toEqual(ACCESS_NOT_VALID);
    });

    it('refuses an invalid token and a malformed header', async () => {
      expect((await readPlan(sim, 'not-a-token')).body).toEqual(ACCESS_NOT_VALID);
      const res = await call(sim, 'GET', `/api/subscriptions/plan/${SEED_PLAN}`, {
        headers: { authorization: 'Bearer a b' },
      });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: 'bad_authorization_header' });
    });

    it('revoke-tokens invalidates every access and refresh token issued so far; a new login works', async () => {
      const old = await login(sim);
      sim.revokeTokens();
      expect((await readPlan(sim, old.access)).body).toEqual(ACCESS_NOT_VALID);
      const refreshed = await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: old.refresh } });
      expect(refreshed.status).toBe(401);
      expect(refreshed.body).toEqual(REFRESH_NOT_VALID);
      const fresh = await login(sim);
      expect((await readPlan(sim, fresh.access)).status).toBe(200);
    });

    it('rotate-signing-key invalidates every token signed with the old key', async () => {
      const old = await login(sim);
      sim.rotateSigningKey();
      expect((await readPlan(sim, old.access)).status).toBe(401);
      expect(
        (await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: old.refresh } })).status,
      ).toBe(401);
      const fresh = await login(sim);
      expect((await readPlan(sim, fresh.access)).status).toBe(200);
    });
  });

  describe('POST /api/validation/document', () => {
    let access: string;
    beforeAll(async () => {
      ({ access } = await login(sim));
    });

    it('answers code 200 for a valid document', async () => {
      const res = await validateWith(sim, access);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ code: '200', description: 'Valid id and type document' });
      const cpf = await validateWith(sim, access, {
        country: 'BRA',
        document: { id: '529.982.247-25', type: 'CPF' },
      });
      expect(cpf.body).toEqual({ code: '200', description: 'Valid id and type document' });
    });

    it('answers code 300 naming the invalid parameter', async () => {
      const badId = await validateWith(sim, access, {
        country: 'ARG',
        document: { id: '20-17254359-8', type: 'CUIT' },
      });
      expect(badId.status).toBe(200);
      expect(badId.body).toEqual({ code: '300', description: 'Invalid param + document.id' });
      const badType = await validateWith(sim, access, { country: 'ARG', document: { id: '1', type: 'SSN' } });
      expect(badType.body).toEqual({ code: '300', description: 'Invalid param + document.type' });
      const badCountry = await validateWith(sim, access, {
        country: 'ZZZ',
        document: { id: '1', type: 'DNI' },
      });
      expect(badCountry.body).toEqual({ code: '300', description: 'Invalid param + country' });
    });

    it('answers 400 with the upstream envelope to a malformed body', async () => {
      const res = await validateWith(sim, access, { country: 'ARG', document: { id: 20172543597 } });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        status: { code: '400', description: 'ERROR', detail: 'Malformed request' },
      });
      const paths = (res.body as { errors: { path: string }[] }).errors.map((e) => e.path).sort();
      expect(paths).toEqual(['document.id', 'document.type']);
    });

    it('answers 400 with the upstream envelope to invalid JSON', async () => {
      const res = await validateWith(sim, access, '{"country":');
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        status: { code: '400', description: 'ERROR', detail: 'Malformed request' },
      });
    });

    it('answers 413 to a body over the limit', async () => {
      const res = await validateWith(sim, access, { ...VALID_CUIT, padding: 'x'.repeat(70_000) });
      expect(res.status).toBe(413);
    });
  });

  describe('GET /api/subscriptions/plan/:internalId', () => {
    let access: string;
    beforeAll(async () => {
      ({ access } = await login(sim));
    });

    it('returns the seed plan with every field', async () => {
      const res = await readPlan(sim, access);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        internalId: SEED_PLAN,
        name: expect.any(String),
        description: expect.any(String),
        amount: expect.any(Number),
        country: expect.stringMatching(/^[A-Z]{3}$/),
        currency: expect.stringMatching(/^[A-Z]{3}$/),
        accountNumber: expect.any(String),
        autoRecurring: { repetitions: expect.any(Number), type: 'hour', frequency: expect.any(Number) },
        status: { code: '100', description: 'ACTIVE', detail: 'Plan is active' },
      });
    });

    it('matches the id case-insensitively', async () => {
      const res = await readPlan(sim, access, SEED_PLAN.toUpperCase());
      expect(res.status).toBe(200);
      expect((res.body as { internalId: string }).internalId).toBe(SEED_PLAN);
    });

    it('answers 404 with the seed body for an unknown plan', async () => {
      for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
        const res = await readPlan(sim, access, id);
        expect(res.status).toBe(404);
        expect(res.body).toEqual({
          status: { code: '400', description: 'ERROR', detail: 'Plan subscription not found' },
        });
      }
      expect(sim.stats().planReads).toBe(2);
    });
  });

  describe('upstream internals for the gateway to strip', () => {
    it('marks every response and sets a session cookie on the operations', async () => {
      const { access } = await login(sim);
      const tokenRes = await call(sim, 'POST', '/api/token/', { body: CREDENTIALS });
      expect(tokenRes.headers.get('server')).toBe('payment-simulator');
      expect(tokenRes.headers.get('x-powered-by')).toBe('simulator');
      for (const res of [await readPlan(sim, access), await validateWith(sim, access)]) {
        expect(res.headers.get('server')).toBe('payment-simulator');
        expect(res.headers.get('x-powered-by')).toBe('simulator');
        expect(res.headers.get('set-cookie')).toMatch(/^upstream_session=[0-9a-f]+;/);
      }
      const stats = await call(sim, 'GET', '/__simulator/stats');
      expect(stats.headers.get('server')).toBe('payment-simulator');
    });
  });

  describe('received-requests log', () => {
    it('records the operation requests exactly as they arrived', async () => {
      const { access } = await login(sim);
      sim.reset();
      await call(sim, 'POST', '/api/validation/document?debug=1', {
        body: { ...VALID_CUIT, extra: true },
        headers: { ...bearer(access), 'x-request-id': 'req-1', cookie: 'a=b' },
      });
      await readPlan(sim, access);
      const log = sim.receivedRequests();
      expect(log).toHaveLength(2);
      expect(log[0]).toMatchObject({
        method: 'POST',
        path: '/api/validation/document',
        query: { debug: '1' },
        body: { ...VALID_CUIT, extra: true },
      });
      expect(log[0]!.headers).toMatchObject({
        authorization: `Bearer ${access}`,
        'x-request-id': 'req-1',
        cookie: 'a=b',
      });
      expect(log[1]).toMatchObject({
        method: 'GET',
        path: `/api/subscriptions/plan/${SEED_PLAN}`,
        query: {},
        body: null,
      });
      // Token requests (which carry the password) are not recorded.
      expect(log.some((r) => r.path.startsWith('/api/token'))).toBe(false);
      const viaHttp = await call(sim, 'GET', '/__simulator/requests');
      expect(viaHttp.body).toEqual(log);
    });

    it('records the headers of the token requests, never their bodies', async () => {
      sim.reset();
      const signedIn = await call(sim, 'POST', '/api/token/', {
        body: CREDENTIALS,
        headers: { 'x-probe': 'login-1' },
      });
      const { refresh } = signedIn.body as { refresh: string };
      await call(sim, 'POST', '/api/token/refresh/', {
        body: { refresh },
        headers: { 'x-probe': 'refresh-1' },
      });
      const log = sim.receivedTokenRequests();
      expect(log.map((r) => [r.method, r.path, r.headers['x-probe']])).toEqual([
        ['POST', '/api/token/', 'login-1'],
        ['POST', '/api/token/refresh/', 'refresh-1'],
      ]);
      expect(JSON.stringify(log)).not.toContain(refresh);
      expect(JSON.stringify(log)).not.toContain(CREDENTIALS.password);
      expect(sim.receivedRequests()).toEqual([]);
      const viaHttp = await call(sim, 'GET', '/__simulator/token-requests');
      expect(viaHttp.body).toEqual(log);
      sim.reset();
      expect(sim.receivedTokenRequests()).toEqual([]);
    });

    it('keeps the last 200', async () => {
      const { access } = await login(sim);
      for (let i = 0; i < 205; i += 1) await readPlan(sim, access, `id-${i}`);
      const log = sim.receivedRequests();
      expect(log).toHaveLength(200);
      expect(log[0]!.path).toBe('/api/subscriptions/plan/id-5');
      expect(log[199]!.path).toBe('/api/subscriptions/plan/id-204');
    });
  });

  describe('faults', () => {
    it('delays the operations by latencyMs', async () => {
      const { access } = await login(sim);
      sim.setFaults({ latencyMs: 300 });
      const started = performance.now();
      expect((await readPlan(sim, access)).status).toBe(200);
      expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    });

    it('answers errorStatus at errorRate 1, with the upstream envelope', async () => {
      const { access } = await login(sim);
      sim.setFaults({ errorRate: 1, errorStatus: 502 });
      const res = await readPlan(sim, access);
      expect(res.status).toBe(502);
      expect(res.body).toEqual({
        status: { code: '502', description: 'ERROR', detail: 'Simulated upstream failure' },
      });
      expect((await validateWith(sim, access)).status).toBe(502);
      // Token endpoints are spared unless asked for.
      expect((await call(sim, 'POST', '/api/token/', { body: CREDENTIALS })).status).toBe(200);
      expect(sim.stats()).toMatchObject({ faultsInjected: 2, planReads: 0, validations: 0 });
    });

    it('defaults errorStatus to 503 and can send Retry-After (e.g. 429)', async () => {
      const { access } = await login(sim);
      expect(sim.setFaults({ errorRate: 1 }).errorStatus).toBe(503);
      expect((await readPlan(sim, access)).status).toBe(503);
      sim.setFaults({ errorRate: 1, errorStatus: 429, retryAfterSeconds: 7 });
      const res = await readPlan(sim, access);
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
    });

    it('includes the token endpoints with includeTokenEndpoints', async () => {
      const { refresh } = await login(sim);
      sim.setFaults({ errorRate: 1, errorStatus: 500, includeTokenEndpoints: true });
      expect((await call(sim, 'POST', '/api/token/', { body: CREDENTIALS })).status).toBe(500);
      expect((await call(sim, 'POST', '/api/token/refresh/', { body: { refresh } })).status).toBe(500);
      expect(sim.stats()).toMatchObject({ logins: 1, refreshes: 0, faultsInjected: 2 });
    });

    it('resets the connection without answering', async () => {
      const { access } = await login(sim);
      sim.setFaults({ resetConnections: true });
      await expect(readPlan(sim, access)).rejects.toThrow();
      await expect(
        request(sim.url).get(`/api/subscriptions/plan/${SEED_PLAN}`).set(bearer(access)),
      ).rejects.toThrow(/socket hang up|ECONNRESET/);
    });

    it('fails every request for a poison id (failIds), and only those, whatever maxFailures says', async () => {
      const { access } = await login(sim);
      sim.setFaults({ failIds: ['20-17254359-7', SEED_PLAN], errorStatus: 500, maxFailures: 1 });
      for (let i = 0; i < 3; i++) {
        expect((await validateWith(sim, access)).status).toBe(500);
        expect((await readPlan(sim, access)).status).toBe(500);
      }
      const other = { country: 'BRA', document: { id: '529.982.247-25', type: 'CPF' } };
      expect((await validateWith(sim, access, other)).status).toBe(200);
      expect(sim.stats()).toMatchObject({ faultsInjected: 6, validations: 1 });
    });

    it('stops failing after maxFailures', async () => {
      const { access } = await login(sim);
      sim.setFaults({ resetConnections: true, maxFailures: 1 });
      await expect(readPlan(sim, access)).rejects.toThrow();
      expect((await readPlan(sim, access)).status).toBe(200);
    });

    it('reset clears faults, counters and the log but keeps tokens valid', async () => {
      const { access } = await login(sim);
      sim.setFaults({ errorRate: 1 });
      expect((await readPlan(sim, access)).status).toBe(503);
      sim.reset();
      expect(sim.stats()).toEqual({
        requests: 0,
        logins: 0,
        loginFailures: 0,
        refreshes: 0,
        refreshFailures: 0,
        validations: 0,
        planReads: 0,
        unauthorized: 0,
        forbidden: 0,
        faultsInjected: 0,
        statements: 0,
        statementsCut: 0,
        accounts: {},
      });
      expect(sim.receivedRequests()).toEqual([]);
      expect(sim.faults()).toMatchObject({ errorRate: 0, latencyMs: 0, resetConnections: false });
      expect((await readPlan(sim, access)).status).toBe(200);
    });

    it('injects an HTML page, an undocumented 2xx and a redirect with a Location when asked to', async () => {
      const { access } = await login(sim);
      const plan = `${sim.url}/api/subscriptions/plan/${SEED_PLAN}`;
      const get = () => fetch(plan, { headers: bearer(access), redirect: 'manual' });
      sim.setFaults({ errorRate: 1, errorStatus: 413, errorBody: 'html' });
      const page = await get();
      expect(page.status).toBe(413);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await page.text()).toContain('<html>');
      sim.setFaults({ errorRate: 1, errorStatus: 201 });
      expect((await get()).status).toBe(201);
      sim.setFaults({ errorRate: 1, errorStatus: 302 });
      const moved = await get();
      expect(moved.status).toBe(302);
      expect(moved.headers.get('location')).toMatch(/^https:\/\/moved\.provider\.example\//);
    });

    it('answers plan-not-found with 400 when asked to, as a provider may (same body)', async () => {
      const { access } = await login(sim);
      sim.setFaults({ planNotFoundStatus: 400 });
      const missing = await readPlan(sim, access, '00000000-0000-4000-8000-000000000000');
      expect(missing.status).toBe(400);
      expect(missing.body).toEqual({
        status: { code: '400', description: 'ERROR', detail: 'Plan subscription not found' },
      });
      sim.setFaults({});
      expect((await readPlan(sim, access, '00000000-0000-4000-8000-000000000000')).status).toBe(404);
    });

    it('refuses invalid faults in process', () => {
      expect(() => sim.setFaults({ errorRate: 2 })).toThrow();
      expect(() => sim.setFaults({ errorStatus: 304 })).toThrow();
      expect(() => sim.setFaults({ errorStatus: 600 })).toThrow();
      expect(() => sim.setFaults({ errorBody: 'xml' as 'html' })).toThrow();
      expect(() => sim.setFaults({ planNotFoundStatus: 200 as 404 })).toThrow();
    });
  });

  describe('stats', () => {
    it('counts every kind of request', async () => {
      const { access, refresh } = await login(sim);
      await call(sim, 'POST', '/api/token/', { body: { ...CREDENTIALS, password: 'no' } });
      await call(sim, 'POST', '/api/token/refresh/', { body: { refresh } });
      await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: access } });
      await validateWith(sim, access);
      await validateWith(sim, access, { bad: true });
      await readPlan(sim, access);
      await readPlan(sim, refresh);
      await call(sim, 'GET', '/nowhere');
      expect(sim.stats()).toEqual({
        requests: 9,
        logins: 1,
        loginFailures: 1,
        refreshes: 1,
        refreshFailures: 1,
        validations: 2,
        planReads: 1,
        unauthorized: 1,
        forbidden: 0,
        faultsInjected: 0,
        statements: 0,
        statementsCut: 0,
        // Per merchant account: two validations and one plan read carried its valid token.
        accounts: { [CREDENTIALS.username]: { logins: 1, loginFailures: 1, refreshes: 1, calls: 3 } },
      });
    });
  });

  describe('test controls over HTTP', () => {
    it('serves stats, faults, reset, revoke-tokens and rotate-signing-key', async () => {
      const first = await login(sim);
      const stats = await call(sim, 'GET', '/__simulator/stats');
      expect(stats.status).toBe(200);
      expect(stats.body).toMatchObject({ logins: 1, requests: 1 });

      const faults = await call(sim, 'POST', '/__simulator/faults', {
        body: { errorRate: 1, errorStatus: 502 },
      });
      expect(faults.status).toBe(200);
      expect(faults.body).toMatchObject({ errorRate: 1, errorStatus: 502, includeTokenEndpoints: false });
      expect((await call(sim, 'GET', '/__simulator/faults')).body).toEqual(faults.body);
      expect((await readPlan(sim, first.access)).status).toBe(502);

      expect((await call(sim, 'POST', '/__simulator/reset')).status).toBe(204);
      expect(sim.stats().requests).toBe(0);
      expect((await readPlan(sim, first.access)).status).toBe(200);

      expect((await call(sim, 'POST', '/__simulator/revoke-tokens')).status).toBe(204);
      expect((await readPlan(sim, first.access)).status).toBe(401);

      const second = await login(sim);
      expect((await call(sim, 'POST', '/__simulator/rotate-signing-key')).status).toBe(204);
      expect((await readPlan(sim, second.access)).status).toBe(401);
    });

    it('answers 400 to invalid faults', async () => {
      for (const body of [
        { errorRate: 1.5 },
        { errorStatus: 200 },
        { latencyMs: -1 },
        { resetConnections: 'yes' },
        { unknown: 1 },
      ]) {
        const res = await call(sim, 'POST', '/__simulator/faults', { body });
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ error: 'invalid faults' });
      }
      expect((await call(sim, 'POST', '/__simulator/faults', { body: '{' })).status).toBe(400);
      expect(sim.faults().errorRate).toBe(0);
    });

    it('keeps controls apart from the upstream paths', async () => {
      expect((await call(sim, 'GET', '/__simulator/nothing')).status).toBe(404);
      expect((await call(sim, 'POST', '/api/__simulator/reset')).status).toBe(404);
      expect(sim.stats().requests).toBe(1);
    });
  });
});

describe('payment API simulator with refresh rotation', () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await startSimulator({ port: 0, rotateRefresh: true });
  });
  afterAll(async () => {
    await sim.close();
  });

  it('returns a new refresh token and blacklists the old one', async () => {
    const first = await login(sim);
    const res = await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: first.refresh } });
    expect(res.status).toBe(200);
    const next = res.body as { access: string; refresh: string };
    expect(Object.keys(next).sort()).toEqual(['access', 'refresh']);
    expect(next.refresh).not.toBe(first.refresh);
    expect(decodeJwt(next.refresh)).toMatchObject({ token_type: 'refresh' });
    const claims = decodeJwt(next.refresh);
    expect(claims.exp! - claims.iat!).toBe(86_400);

    const reused = await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: first.refresh } });
    expect(reused.status).toBe(401);
    expect(reused.body).toEqual(REFRESH_NOT_VALID);
    expect((await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: next.refresh } })).status).toBe(
      200,
    );
    expect((await readPlan(sim, next.access)).status).toBe(200);
  });
});

describe('payment API simulator with configured lifetimes and credentials', () => {
  it('signs the configured lifetimes', async () => {
    const sim = await startSimulator({ port: 0, accessTtlSeconds: 42, refreshTtlSeconds: 4200 });
    try {
      const { access, refresh } = await login(sim);
      const a = decodeJwt(access);
      const r = decodeJwt(refresh);
      expect(a.exp! - a.iat!).toBe(42);
      expect(r.exp! - r.iat!).toBe(4200);
    } finally {
      await sim.close();
    }
  });

  it('accepts only the configured credentials', async () => {
    const sim = await startSimulator({ port: 0, username: 'merchant-7', password: 'pw-7' });
    try {
      expect((await call(sim, 'POST', '/api/token/', { body: CREDENTIALS })).status).toBe(401);
      const res = await call(sim, 'POST', '/api/token/', {
        body: { username: 'merchant-7', password: 'pw-7' },
      });
      expect(res.status).toBe(200);
    } finally {
      await sim.close();
    }
  });

  it('refuses an expired access token (1 s lifetime, real clock) while the refresh token still works', async () => {
    const sim = await startSimulator({ port: 0, accessTtlSeconds: 1 });
    try {
      const { access, refresh } = await login(sim);
      await new Promise((r) => setTimeout(r, 1200));
      const res = await readPlan(sim, access);
      expect(res.status).toBe(401);
      expect(res.body).toEqual(ACCESS_NOT_VALID);
      const refreshed = await call(sim, 'POST', '/api/token/refresh/', { body: { refresh } });
      expect(refreshed.status).toBe(200);
      expect((await readPlan(sim, (refreshed.body as { access: string }).access)).status).toBe(200);
    } finally {
      await sim.close();
    }
  });

  it('refuses expired tokens by an injected clock, exactly at exp', async () => {
    const clock = { now: Date.now() };
    const sim = await startSimulator({ port: 0 }, { now: () => clock.now });
    try {
      const { access, refresh } = await login(sim);
      clock.now += 299_000;
      expect((await readPlan(sim, access)).status).toBe(200);
      clock.now += 1_000;
      expect((await readPlan(sim, access)).status).toBe(401);
      clock.now += 86_100_000;
      expect((await call(sim, 'POST', '/api/token/refresh/', { body: { refresh } })).status).toBe(401);
    } finally {
      await sim.close();
    }
  });
});

describe('payment API simulator IP allow-list', () => {
  it('answers 403 to callers outside the list on every upstream path, but not on the controls', async () => {
    const sim = await startSimulator({ port: 0, allowedIps: ['10.9.9.9'] });
    try {
      const forbidden = { detail: 'You do not have permission to perform this action.' };
      for (const res of [
        await call(sim, 'POST', '/api/token/', { body: CREDENTIALS }),
        await call(sim, 'POST', '/api/token/', { body: { username: 'wrong' } }),
        await call(sim, 'POST', '/api/token/refresh/', { body: { refresh: 'x' } }),
        await call(sim, 'POST', '/api/validation/document', { body: VALID_CUIT }),
        await call(sim, 'GET', `/api/subscriptions/plan/${SEED_PLAN}`),
        await call(sim, 'GET', '/nowhere'),
      ]) {
        expect(res.status).toBe(403);
        expect(res.body).toEqual(forbidden);
      }
      const stats = await call(sim, 'GET', '/__simulator/stats');
      expect(stats.status).toBe(200);
      expect(stats.body).toMatchObject({
        forbidden: 6,
        requests: 6,
        logins: 0,
        loginFailures: 0,
        unauthorized: 0,
      });
      expect(sim.receivedRequests()).toEqual([]);
    } finally {
      await sim.close();
    }
  });

  it('admits listed callers, IPv4-mapped or not', async () => {
    const sim = await startSimulator({ port: 0, allowedIps: ['::ffff:127.0.0.1'] });
    try {
      expect((await call(sim, 'POST', '/api/token/', { body: CREDENTIALS })).status).toBe(200);
      expect(sim.stats().forbidden).toBe(0);
    } finally {
      await sim.close();
    }
  });
});

describe('payment API simulator lifecycle', () => {
  it('close() ends pending latency and open keep-alive connections at once', async () => {
    const sim = await startSimulator({ port: 0 });
    const { access } = await login(sim);
    sim.setFaults({ latencyMs: 60_000 });
    const pending = readPlan(sim, access).catch((err: unknown) => err);
    await new Promise((r) => setTimeout(r, 50));
    const started = performance.now();
    await sim.close();
    expect(performance.now() - started).toBeLessThan(1000);
    // fetch's TypeError comes from another realm than Jest's, so match it by name.
    expect(await pending).toMatchObject({ name: 'TypeError', message: 'fetch failed' });
  });

  it('reports a port already in use', async () => {
    const sim = await startSimulator({ port: 0 });
    try {
      await expect(startSimulator({ port: sim.port })).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await sim.close();
    }
  });
});
