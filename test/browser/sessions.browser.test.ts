// A real Chromium logs in through local mode's development identity provider, uses both operations with the session
// cookie alone, and a page on another origin tries to ride that cookie: it can neither read answers nor get one call
// through. The screenshot for the README is taken here.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { Browser, BrowserContext } from 'playwright-core';
import { launchChromium } from '../support/chromium';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { waitFor } from '../support/ports';

const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const SCREENSHOT = resolve(__dirname, '../../docs/browser-session.png');

/** A hostile page: tries every way a page can use someone else's cookie, and writes what it could read. */
function hostilePage(gatewayUrl: string): string {
  const script = `
    const results = {};
    const attempt = (name, promise) => promise.then(
      async (r) => { results[name] = { status: r.status, type: r.type, body: await r.text().catch(() => null) }; },
      (e) => { results[name] = { error: e.name }; });
    Promise.all([
      attempt('withCsrfHeader', fetch(${JSON.stringify(`${gatewayUrl}/api/subscriptions/plan/${PLAN_ID}`)}, { credentials: 'include', headers: { 'X-CSRF': '1' } })),
      attempt('simpleRequest', fetch(${JSON.stringify(`${gatewayUrl}/api/subscriptions/plan/${PLAN_ID}`)}, { credentials: 'include' })),
      attempt('noCors', fetch(${JSON.stringify(`${gatewayUrl}/api/validation/document`)}, { method: 'POST', mode: 'no-cors', credentials: 'include', body: '{"country":"ARG","document":{"id":"20-17254359-7","type":"CUIT"}}' })),
      attempt('user', fetch(${JSON.stringify(`${gatewayUrl}/bff/user`)}, { credentials: 'include', headers: { 'X-CSRF': '1' } })),
    ]).then(() => {
      const el = document.getElementById('result');
      el.textContent = JSON.stringify(results);
      el.dataset.done = 'true';
    });`;
  return `<!doctype html><html><head><title>hostile</title></head><body><pre id="result"></pre>
<form id="logout" method="post" action="${gatewayUrl}/bff/logout"></form><script>${script}</script></body></html>`;
}

function servePage(html: () => string): Promise<{ server: Server; origin: string }> {
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(html());
  });
  return new Promise((done) =>
    server.listen(0, '127.0.0.1', () =>
      done({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
    ),
  );
}

describe('browser sessions in a real browser (Chromium)', () => {
  let browser: Browser;
  let context: BrowserContext;
  let gateway: GatewayProcess;
  let hostile: { server: Server; origin: string };

  beforeAll(async () => {
    // Local mode: the simulator upstream, the development identity provider and the web app at /.
    gateway = await startGatewayProcess({ env: {} });
    hostile = await servePage(() => hostilePage(gateway.url));
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 900, height: 760 } });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.stop();
    hostile?.server.close();
  });

  const credentials = () => {
    const match = /as (\S+) \/ (\S+) {3}\(a new password/.exec(gateway.logs());
    if (!match) throw new Error(`no development user printed:\n${gateway.logs()}`);
    return { username: match[1] ?? '', password: match[2] ?? '' };
  };
  const plansAnswered = (status: number) =>
    gateway
      .logs()
      .split('\n')
      .filter((line) => line.includes('"route":"plan"') && line.includes(`"status":${status}`)).length;

  test('logs in through the development provider and calls both operations with the cookie alone', async () => {
    const page = await context.newPage();
    await page.goto(`${gateway.url}/`);
    await page.click('#login');
    await page.waitForSelector('input[name="username"]');
    const { username, password } = credentials();
    await page.fill('input[name="username"]', username);
    await page.fill('input[name="password"]', password);
    await page.click('button[type="submit"]');
    await page.waitForSelector('body[data-ready="true"]', { timeout: 10_000 });
    expect(page.url()).toBe(`${gateway.url}/`);
    expect(await page.textContent('#user-name')).toBe('Dev User');
    expect(await page.textContent('#user-scopes')).toBe('documents:validate plans:read');

    await page.click('#validate button');
    await page.waitForSelector('#answer[data-status="200"]');
    expect(await page.textContent('#answer')).toContain('"code": "200"');
    await page.evaluate("delete document.getElementById('answer').dataset.status");
    await page.click('#plan button');
    await page.waitForSelector('#answer[data-status="200"]');
    expect(await page.textContent('#answer')).toContain(PLAN_ID);
    // Local mode serves two provider accounts: the web app's default answers, then the one picked.
    expect(await page.textContent('#answered-by')).toBe('sandbox');
    await page.evaluate("delete document.getElementById('answer').dataset.status");
    await page.selectOption('#account', 'production');
    await page.click('#plan button');
    await page.waitForSelector('#answer[data-status="200"]');
    expect(await page.textContent('#answered-by')).toBe('production');
    await page.screenshot({ path: SCREENSHOT });

    // The page's script sees no cookie and no token.
    expect(await page.evaluate('document.cookie')).toBe('');
    const storage = await page.evaluate(
      'JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })',
    );
    expect(storage).toBe('{}{}');
    expect(await page.content()).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}/);
    await page.close();
  }, 30_000);

  test('the cookie, as the browser holds it: __Host-, Secure, HttpOnly, SameSite=Strict, Path=/, host-only', async () => {
    const cookies = await context.cookies(gateway.url);
    const session = cookies.find((cookie) => cookie.name === '__Host-bff-session');
    expect(session).toMatchObject({
      domain: '127.0.0.1',
      path: '/',
      secure: true,
      httpOnly: true,
      sameSite: 'Strict',
    });
    expect(session?.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // The login binding (no authority of its own: each login's state is one-use) outlives the callback, so logins
    // started in several tabs all finish; it is as locked down as the session cookie and gone within 10 minutes.
    const binding = cookies.find((cookie) => cookie.name === '__Host-bff-login');
    expect(binding).toMatchObject({
      domain: '127.0.0.1',
      path: '/',
      secure: true,
      httpOnly: true,
      sameSite: 'Lax',
    });
    expect((binding?.expires ?? Number.POSITIVE_INFINITY) - Date.now() / 1000).toBeLessThanOrEqual(600);
  });

  test('a page on another origin can neither read an answer nor get a cookie-authenticated call through', async () => {
    const okBefore = plansAnswered(200);
    const page = await context.newPage();
    await page.goto(`${hostile.origin}/`);
    await page.waitForSelector('#result[data-done="true"]', { state: 'attached', timeout: 10_000 });
    const results = JSON.parse((await page.textContent('#result')) ?? '{}');
    // The custom header forces a preflight, which the gateway refuses for a foreign origin: nothing is sent.
    expect(results.withCsrfHeader).toEqual({ error: 'TypeError' });
    expect(results.user).toEqual({ error: 'TypeError' });
    // Without it the browser sends the request (the origin is same-site, so even the Strict cookie goes along), but
    // the gateway refuses it 403 with no CORS header (and CORP same-origin): the page reads nothing, not even a status.
    expect(results.simpleRequest).toEqual({ error: 'TypeError' });
    expect(results.noCors).toEqual({ error: 'TypeError' });
    // The gateway process's log lines reach this process after the page has its answers: wait for them (bounded).
    await waitFor(
      () => plansAnswered(403) >= 1 && /"route":"validation"[^\n]*"status":403/.test(gateway.logs()),
      { timeoutMs: 5_000, what: 'the log lines of the two refused requests' },
    );
    expect(plansAnswered(200)).toBe(okBefore);

    // A cross-origin form cannot log the user out (no X-CSRF header on a form post).
    await Promise.all([
      page.waitForNavigation(),
      page.evaluate("document.getElementById('logout').submit()"),
    ]);
    expect(await page.textContent('body')).toContain('CLIENT_FORBIDDEN');
    await page.close();

    const own = await context.newPage();
    await own.goto(`${gateway.url}/`);
    await own.waitForSelector('body[data-ready="true"]', { timeout: 10_000 });
    await own.close();
  }, 30_000);

  test('no token and no session id in any log line', async () => {
    const session = (await context.cookies(gateway.url)).find(
      (cookie) => cookie.name === '__Host-bff-session',
    );
    const logs = gateway.logs();
    expect(logs).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}/);
    expect(logs).not.toContain(session?.value ?? 'never');
  });
});
