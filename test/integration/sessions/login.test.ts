// Browser sessions against a real oidc-provider (the development provider of local mode) and the real gateway.
import { SESSION_COOKIE } from '../../../src/sessions/cookies';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { CookieJar, login, loginUntilCallback, request } from '../../support/oidc-browser';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const DOCUMENT = JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } });
const ajax = { 'x-csrf': '1' };

let gateway: TestGateway;
let user: { username: string; password: string };

beforeAll(async () => {
  gateway = await startTestGateway({});
  const provider = gateway.gateway.identityProvider;
  if (!provider) throw new Error('local mode started no identity provider');
  user = { username: provider.username, password: provider.password };
});
afterAll(() => gateway.close());

async function signedIn(
  returnTo = '/',
): Promise<{ jar: CookieJar; answer: Awaited<ReturnType<typeof login>> }> {
  const jar = new CookieJar();
  const answer = await login(jar, gateway.url, user, returnTo);
  return { jar, answer };
}

describe('login, user, operations and logout through the session cookie', () => {
  it('logs in with code + PKCE and sets the session cookie with its attributes', async () => {
    const { jar, answer } = await signedIn('/somewhere?tab=2');
    expect(answer.status).toBe(303);
    expect(answer.location).toBe(`${gateway.url}/somewhere?tab=2`);
    const cookie = answer.setCookies.find((line) => line.startsWith(`${SESSION_COOKIE}=`));
    expect(cookie).toMatch(
      /^__Host-bff-session=[A-Za-z0-9_-]{43}; Path=\/; Secure; HttpOnly; SameSite=Strict; Max-Age=43200$/,
    );
    expect(jar.get(gateway.url, SESSION_COOKIE)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('the start of a login asks for PKCE S256 and sends the browser to the provider', async () => {
    const jar = new CookieJar();
    const start = await request(jar, `${gateway.url}/bff/login`);
    const url = new URL(start.location ?? '');
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url.searchParams.get('state')).toBeTruthy();
    expect(url.searchParams.get('nonce')).toBeTruthy();
    expect(url.searchParams.get('redirect_uri')).toBe(`${gateway.url}/bff/callback`);
    expect(start.setCookies.join()).toMatch(
      /__Host-bff-login=[^;]+; Path=\/; Secure; HttpOnly; SameSite=Lax/,
    );
  });

  it('/openapi.json of a gateway with sessions lists /bff/*', async () => {
    const document = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as { paths: object };
    expect(Object.keys(document.paths)).toEqual(
      expect.arrayContaining(['/bff/login', '/bff/user', '/bff/logout']),
    );
  });

  it('/bff/user shows name, email and scopes, never a token', async () => {
    const { jar } = await signedIn();
    const answer = await request(jar, `${gateway.url}/bff/user`, { headers: ajax });
    expect(answer.status).toBe(200);
    const body = JSON.parse(answer.body);
    expect(body).toMatchObject({
      name: 'Dev User',
      email: 'dev@example.test',
      scopes: ['documents:validate', 'plans:read'],
    });
    expect(Object.keys(body).sort()).toEqual(['email', 'expiresAt', 'name', 'scopes']);
    expect(answer.body).not.toMatch(/eyJ|refresh|access_token|id_token/i);
  });

  it('calls both operations with the cookie and X-CSRF', async () => {
    const { jar } = await signedIn();
    const plan = await request(jar, `${gateway.url}${PLAN}`, { headers: ajax });
    expect(plan.status).toBe(200);
    const document = await request(jar, `${gateway.url}/api/validation/document`, {
      method: 'POST',
      body: DOCUMENT,
      headers: { ...ajax, 'content-type': 'application/json', origin: gateway.url },
    });
    expect(document.status).toBe(200);
    expect(JSON.parse(document.body)).toMatchObject({ code: '200' });
  });

  it('logs out: the session ends and the cookie is cleared; the provider logout link carries id_token_hint', async () => {
    const { jar } = await signedIn();
    const cookie = jar.get(gateway.url, SESSION_COOKIE) ?? '';
    const out = await request(jar, `${gateway.url}/bff/logout`, { method: 'POST', headers: ajax });
    expect(out.status).toBe(200);
    const body = JSON.parse(out.body);
    expect(body.loggedOut).toBe(true);
    // SESSION_END_SESSION_METHOD=get (the default): one link, the hint in it (provider-logout.test.ts follows it).
    const url = new URL(body.endSessionUrl);
    expect(url.searchParams.get('client_id')).toBe('local-web-app');
    expect(url.searchParams.get('id_token_hint')).toMatch(/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(body.endSessionForm).toBeNull();
    expect(out.setCookies.join()).not.toContain(url.searchParams.get('id_token_hint'));
    expect(out.setCookies.join()).toMatch(
      /__Host-bff-session=; Path=\/; Secure; HttpOnly; SameSite=Strict; Max-Age=0/,
    );
    const jar2 = new CookieJar();
    jar2.set(gateway.url, SESSION_COOKIE, cookie);
    const after = await request(jar2, `${gateway.url}${PLAN}`, { headers: ajax });
    expect(after.status).toBe(401);
    expect(JSON.parse(after.body).status.detail).toContain('/bff/login');
  });
});

describe('every Set-Cookie the gateway sends', () => {
  it('carries __Host- rules (Path=/, Secure, no Domain), HttpOnly and SameSite on login, callback, 401 and logout', async () => {
    const { jar } = await signedIn();
    const good = jar.get(gateway.url, SESSION_COOKIE) ?? '';
    const ended = new CookieJar();
    ended.set(gateway.url, SESSION_COOKIE, `${good.slice(0, -2)}AA`);
    expect((await request(ended, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(401);
    expect((await request(jar, `${gateway.url}/bff/logout`, { method: 'POST', headers: ajax })).status).toBe(
      200,
    );
    const lines = [...jar.raw, ...ended.raw].filter((line) => line.startsWith('__Host-'));
    expect(lines.length).toBeGreaterThanOrEqual(4);
    for (const line of lines) {
      const attributes = line
        .split(';')
        .slice(1)
        .map((a) => a.trim().toLowerCase());
      expect(attributes).toEqual(expect.arrayContaining(['path=/', 'secure', 'httponly']));
      expect(attributes.some((a) => a === 'samesite=strict' || a === 'samesite=lax')).toBe(true);
      expect(attributes.some((a) => a.startsWith('domain='))).toBe(false);
      expect(line.startsWith('__Host-bff-login=') ? 'samesite=lax' : 'samesite=strict').toBe(
        attributes.find((a) => a.startsWith('samesite=')),
      );
    }
    expect(ended.raw.join()).toMatch(
      /__Host-bff-session=; Path=\/; Secure; HttpOnly; SameSite=Strict; Max-Age=0/,
    );
  });
});

describe('adversaries of the login', () => {
  it.each([
    'https://evil.example/',
    '//evil.example/',
    '/\\evil.example/',
    '\\\\evil.example',
    'javascript:alert(1)',
    '/%2F%2Fevil.example',
    '/%5Cevil.example',
    '%2F%2Fevil.example',
    '/%252F%252Fevil.example',
    'evil.example',
    '/\tfoo',
    'http:/evil.example',
    '/.//evil.example',
    '/bff/login',
    '/BFF/logout',
  ])('refuses returnTo=%s with 400 and the envelope, before any provider call', async (returnTo) => {
    const jar = new CookieJar();
    const answer = await request(jar, `${gateway.url}/bff/login?returnTo=${encodeURIComponent(returnTo)}`);
    expect(answer.status).toBe(400);
    expect(answer.location).toBeUndefined();
    expect(JSON.parse(answer.body).status).toMatchObject({ code: '400', description: 'INVALID_REQUEST' });
  });

  it('refuses a callback replayed after it logged in', async () => {
    const jar = new CookieJar();
    const { callbackUrl } = await loginUntilCallback(jar, gateway.url, user);
    const loginCookie = jar.get(gateway.url, '__Host-bff-login') ?? '';
    expect((await request(jar, callbackUrl)).status).toBe(303);
    const replayJar = new CookieJar();
    replayJar.set(gateway.url, '__Host-bff-login', loginCookie);
    const replay = await request(replayJar, callbackUrl);
    expect(replay.status).toBe(400);
    expect(replay.setCookies.some((line) => /^__Host-bff-session=[^;]/.test(line))).toBe(false);
    expect(replayJar.get(gateway.url, SESSION_COOKIE)).toBeUndefined();
  });

  it("refuses a callback carrying the provider's error instead of a code", async () => {
    const jar = new CookieJar();
    const { callbackUrl } = await loginUntilCallback(jar, gateway.url, user);
    const denied = new URL(callbackUrl);
    denied.searchParams.delete('code');
    denied.searchParams.set('error', 'access_denied');
    const answer = await request(jar, denied.href);
    expect(answer.status).toBe(400);
    expect(jar.get(gateway.url, SESSION_COOKIE)).toBeUndefined();
  });

  it("refuses a callback whose code was swapped for another login's code", async () => {
    const victim = new CookieJar();
    const attacker = new CookieJar();
    const mine = await loginUntilCallback(victim, gateway.url, user);
    const theirs = await loginUntilCallback(attacker, gateway.url, user);
    const swapped = new URL(mine.callbackUrl);
    swapped.searchParams.set('code', new URL(theirs.callbackUrl).searchParams.get('code') ?? '');
    // PKCE: the code was issued for the other login's challenge, so this login's verifier does not redeem it.
    expect((await request(victim, swapped.href)).status).toBe(400);
    expect(victim.get(gateway.url, SESSION_COOKIE)).toBeUndefined();
  });

  it.each([
    ['another issuer', 'https://evil.example'],
    ['no issuer', null],
  ])('refuses a callback naming %s in iss (RFC 9207 mix-up defence)', async (_name, iss) => {
    const jar = new CookieJar();
    const { callbackUrl } = await loginUntilCallback(jar, gateway.url, user);
    const mixed = new URL(callbackUrl);
    expect(mixed.searchParams.get('iss')).toBe(gateway.gateway.identityProvider?.issuer);
    if (iss === null) mixed.searchParams.delete('iss');
    else mixed.searchParams.set('iss', iss);
    const answer = await request(jar, mixed.href);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).status.description).toBe('INVALID_REQUEST');
    expect(jar.get(gateway.url, SESSION_COOKIE)).toBeUndefined();
  });

  it.each([
    ['the code twice', (url: URL) => url.searchParams.append('code', 'other')],
    ['the state twice', (url: URL) => url.searchParams.append('state', url.searchParams.get('state') ?? '')],
    ['the iss twice', (url: URL) => url.searchParams.append('iss', url.searchParams.get('iss') ?? '')],
    ['an empty code', (url: URL) => url.searchParams.set('code', '')],
    ['no code', (url: URL) => url.searchParams.delete('code')],
    ['an id_token parameter', (url: URL) => url.searchParams.set('id_token', 'eyJhbGciOiJub25lIn0.e30.')],
  ])('a callback with %s is a 400 with the envelope, never a 5xx', async (_name, alter) => {
    const jar = new CookieJar();
    const { callbackUrl } = await loginUntilCallback(jar, gateway.url, user);
    const altered = new URL(callbackUrl);
    alter(altered);
    const answer = await request(jar, altered.href);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).status.description).toBe('INVALID_REQUEST');
    expect(jar.get(gateway.url, SESSION_COOKIE)).toBeUndefined();
  });

  it('two logins started in two tabs of one browser both finish (the session expired in both)', async () => {
    const jar = new CookieJar();
    const first = await loginUntilCallback(jar, gateway.url, user, '/first');
    const second = await loginUntilCallback(jar, gateway.url, user, '/second');
    const one = await request(jar, first.callbackUrl);
    expect(one.status).toBe(303);
    expect(one.location).toBe(`${gateway.url}/first`);
    const two = await request(jar, second.callbackUrl);
    expect(two.status).toBe(303);
    expect(two.location).toBe(`${gateway.url}/second`);
    expect((await request(jar, `${gateway.url}/bff/user`, { headers: ajax })).status).toBe(200);
    // Each state still works once only, and only in this browser.
    expect((await request(jar, first.callbackUrl)).status).toBe(400);
    expect((await request(new CookieJar(), second.callbackUrl)).status).toBe(400);
  });

  it('a HEAD of the callback (a link checker) does not spend the login', async () => {
    const jar = new CookieJar();
    const { callbackUrl } = await loginUntilCallback(jar, gateway.url, user);
    expect((await request(jar, callbackUrl, { method: 'HEAD' })).status).toBe(405);
    expect((await request(jar, callbackUrl)).status).toBe(303);
    expect(jar.get(gateway.url, SESSION_COOKIE)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('refuses a callback whose state is unknown or altered', async () => {
    const jar = new CookieJar();
    const { callbackUrl } = await loginUntilCallback(jar, gateway.url, user);
    const altered = new URL(callbackUrl);
    altered.searchParams.set('state', `${altered.searchParams.get('state')}x`);
    expect((await request(jar, altered.href)).status).toBe(400);
    const missing = new URL(callbackUrl);
    missing.searchParams.delete('state');
    expect((await request(jar, missing.href)).status).toBe(400);
    expect(jar.get(gateway.url, SESSION_COOKIE)).toBeUndefined();
  });

  it('refuses a callback finished in another browser than the one that started the login (login CSRF)', async () => {
    const attacker = new CookieJar();
    const { callbackUrl } = await loginUntilCallback(attacker, gateway.url, user);
    const victim = new CookieJar();
    const answer = await request(victim, callbackUrl);
    expect(answer.status).toBe(400);
    expect(victim.get(gateway.url, SESSION_COOKIE)).toBeUndefined();
  });

  it('gives a new session id at login: a planted session cookie is neither kept nor usable (no fixation)', async () => {
    const planted = (await signedIn()).jar.get(gateway.url, SESSION_COOKIE) ?? '';
    const jar = new CookieJar();
    jar.set(gateway.url, SESSION_COOKIE, planted);
    const answer = await login(jar, gateway.url, user);
    expect(answer.status).toBe(303);
    const fresh = jar.get(gateway.url, SESSION_COOKIE);
    expect(fresh).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(fresh).not.toBe(planted);
    const old = new CookieJar();
    old.set(gateway.url, SESSION_COOKIE, planted);
    expect((await request(old, `${gateway.url}/bff/user`, { headers: ajax })).status).toBe(401);
  });
});

describe('adversaries of cookie-authenticated calls (CSRF)', () => {
  let jar: CookieJar;
  beforeAll(async () => {
    jar = (await signedIn()).jar;
  });

  it('refuses 403 without X-CSRF: 1 (a cross-site form or image cannot set it)', async () => {
    for (const headers of [{}, { 'x-csrf': '0' }, { 'x-csrf': 'true' }] as Record<string, string>[]) {
      const answer = await request(jar, `${gateway.url}${PLAN}`, { headers });
      expect(answer.status).toBe(403);
      expect(JSON.parse(answer.body).status.description).toBe('CLIENT_FORBIDDEN');
    }
    const form = await request(jar, `${gateway.url}/api/validation/document`, {
      method: 'POST',
      body: 'country=ARG',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(403);
  });

  it('refuses 403 from a foreign Origin even with X-CSRF', async () => {
    for (const origin of ['https://evil.example', 'null', 'http://127.0.0.1:1']) {
      const answer = await request(jar, `${gateway.url}${PLAN}`, { headers: { ...ajax, origin } });
      expect(answer.status).toBe(403);
    }
    const logout = await request(jar, `${gateway.url}/bff/logout`, {
      method: 'POST',
      headers: { ...ajax, origin: 'https://evil.example' },
    });
    expect(logout.status).toBe(403);
    expect((await request(jar, `${gateway.url}/bff/user`, { headers: ajax })).status).toBe(200);
  });

  it('refuses 403 a request the browser marks as not same-origin (Sec-Fetch-Site), even without an Origin', async () => {
    for (const site of ['cross-site', 'same-site', 'none']) {
      const answer = await request(jar, `${gateway.url}${PLAN}`, {
        headers: { ...ajax, 'sec-fetch-site': site },
      });
      expect(answer.status).toBe(403);
      expect(JSON.parse(answer.body).status.description).toBe('CLIENT_FORBIDDEN');
    }
    const same = await request(jar, `${gateway.url}${PLAN}`, {
      headers: { ...ajax, 'sec-fetch-site': 'same-origin' },
    });
    expect(same.status).toBe(200);
  });

  it('methods nobody thought of: HEAD needs X-CSRF too; PUT, DELETE, PATCH and a bare OPTIONS are 405 with the cookie', async () => {
    expect((await request(jar, `${gateway.url}${PLAN}`, { method: 'HEAD' })).status).toBe(403);
    expect((await request(jar, `${gateway.url}${PLAN}`, { method: 'HEAD', headers: ajax })).status).toBe(200);
    for (const method of ['PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      for (const path of [PLAN, '/api/validation/document', '/bff/user', '/bff/logout']) {
        const answer = await request(jar, `${gateway.url}${path}`, { method, headers: ajax });
        expect(answer.status).toBe(405);
      }
    }
    expect((await request(jar, `${gateway.url}/bff/user`, { headers: ajax })).status).toBe(200);
  });

  it('a cross-site text/plain form post or a GET of /bff/logout neither calls nor logs out', async () => {
    const form = await request(jar, `${gateway.url}/api/validation/document`, {
      method: 'POST',
      body: DOCUMENT,
      headers: {
        'content-type': 'text/plain',
        origin: 'https://evil.example',
        'sec-fetch-site': 'cross-site',
      },
    });
    expect(form.status).toBe(403);
    expect((await request(jar, `${gateway.url}/bff/logout`)).status).toBe(405);
    const logout = await request(jar, `${gateway.url}/bff/logout`, {
      method: 'POST',
      body: 'x=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
    });
    expect(logout.status).toBe(403);
    expect((await request(jar, `${gateway.url}/bff/user`, { headers: ajax })).status).toBe(200);
  });

  it('a preflight never allows credentials or X-CSRF to another origin', async () => {
    for (const origin of ['https://evil.example', 'null']) {
      for (const path of [PLAN, '/bff/user', '/bff/logout']) {
        const answer = await fetch(`${gateway.url}${path}`, {
          method: 'OPTIONS',
          headers: {
            origin,
            'access-control-request-method': 'POST',
            'access-control-request-headers': 'x-csrf, content-type',
          },
        });
        expect(answer.status).toBe(403);
        expect(answer.headers.get('access-control-allow-credentials')).toBeNull();
        expect(answer.headers.get('access-control-allow-origin')).toBeNull();
      }
    }
  });

  it('refuses 401 a tampered, unknown or duplicated session cookie', async () => {
    const good = jar.get(gateway.url, SESSION_COOKIE) ?? '';
    const flipped = `${good.slice(0, -1)}${good.endsWith('A') ? 'B' : 'A'}`;
    for (const cookie of [flipped, 'x', '', `${good}x`]) {
      const answer = await fetch(`${gateway.url}${PLAN}`, {
        headers: { ...ajax, cookie: `${SESSION_COOKIE}=${cookie}` },
      });
      expect(answer.status).toBe(401);
    }
    const twice = await fetch(`${gateway.url}${PLAN}`, {
      headers: { ...ajax, cookie: `${SESSION_COOKIE}=${good}; ${SESSION_COOKIE}=${flipped}` },
    });
    expect(twice.status).toBe(401);
  });

  it('a wrong API key or bearer token beside a valid cookie is refused, not rescued by the cookie', async () => {
    const cookie = `${SESSION_COOKIE}=${jar.get(gateway.url, SESSION_COOKIE) ?? ''}`;
    for (const credential of [{ 'x-api-key': 'wrong-key' }, { authorization: 'Bearer not-a-token' }]) {
      const answer = await fetch(`${gateway.url}${PLAN}`, { headers: { ...ajax, cookie, ...credential } });
      expect(answer.status).toBe(401);
    }
  });

  it('API keys keep working beside sessions', async () => {
    const answer = await fetch(`${gateway.url}${PLAN}`, { headers: { 'x-api-key': 'local-dev-key' } });
    expect(answer.status).toBe(200);
  });

  it('the request log names the web app and the user by a keyed reference; no token or session id in logs or metrics', async () => {
    const cookie = jar.get(gateway.url, SESSION_COOKIE) ?? 'never';
    expect((await request(jar, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(200);
    const line = gateway
      .logs()
      .split('\n')
      .find((entry) => entry.includes('"route":"plan"') && entry.includes('"client":"local-web-app"'));
    expect(line).toMatch(/"user":"[A-Za-z0-9_-]{16}"/);
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    for (const text of [gateway.logs(), metrics]) {
      expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}/);
      expect(text).not.toContain(cookie);
      expect(text).not.toContain('dev-user');
      expect(text).not.toContain('dev@example.test');
    }
    expect(metrics).toContain('client="local-web-app"');
  });
});
