// A real Chromium loads an internal app from one loopback origin and a foreign page from another; both call the
// gateway (a third origin) with a company-SSO bearer token. Only the allowed origin may read the answer.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../support/chromium';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { startTestIssuer, type TestIssuer } from '../unit/callers/support/oidc-test-issuer';

const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const AUDIENCE = 'payments-bff';

/** The page calls the gateway and writes what happened into #result. */
function appPage(gatewayUrl: string, token: string): string {
  const call = `
    fetch(${JSON.stringify(`${gatewayUrl}/api/subscriptions/plan/${PLAN_ID}`)}, {
      headers: { Authorization: 'Bearer ' + ${JSON.stringify(token)} },
    })
      .then(async (r) => ({ ok: r.ok, status: r.status, requestId: r.headers.get('x-request-id'), body: await r.json() }))
      .catch((e) => ({ error: e.name + ': ' + e.message }))
      .then((outcome) => {
        const el = document.getElementById('result');
        el.textContent = JSON.stringify(outcome);
        el.dataset.done = 'true';
      });`;
  return `<!doctype html><html><head><title>internal app</title></head>
<body><pre id="result"></pre><script>${call}</script></body></html>`;
}

function servePage(html: () => string): Promise<{ server: Server; origin: string }> {
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(html());
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    }),
  );
}

describe('CORS in a real browser (Chromium)', () => {
  let browser: Browser;
  let issuer: TestIssuer;
  let gateway: GatewayProcess;
  let token: string;
  const pages: { server: Server; origin: string }[] = [];
  let allowed: { server: Server; origin: string };
  let foreign: { server: Server; origin: string };

  beforeAll(async () => {
    issuer = await startTestIssuer();
    const html = () => appPage(gateway.url, token);
    allowed = await servePage(html);
    foreign = await servePage(html);
    pages.push(allowed, foreign);
    // Local mode: the gateway starts the bundled simulator as its upstream.
    gateway = await startGatewayProcess({
      env: {
        // Local mode serves two provider accounts: an SSO client uses the ones its registry entry lists (an entry
        // needs a key hash, unused here: the app calls with its SSO token).
        CLIENTS_FILE: writeClientsFile([
          {
            id: 'intranet-web',
            keys: [randomBytes(24).toString('base64url')],
            scopes: ['plans:read'],
            accounts: ['sandbox'],
          },
        ]),
        CORS_ORIGINS: allowed.origin,
        OIDC_ISSUER: issuer.issuer,
        OIDC_AUDIENCE: AUDIENCE,
        OIDC_JWKS_URL: issuer.jwksUrl,
      },
    });
    token = await issuer.sign({
      aud: AUDIENCE,
      azp: 'intranet-web',
      sub: 'employee-42',
      scope: 'plans:read',
    });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.stop();
    await issuer?.close();
    for (const page of pages) page.server.close();
  });

  async function outcomeAt(origin: string): Promise<Record<string, unknown>> {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${origin}/app.html`);
      await page.waitForSelector('#result[data-done="true"]', { state: 'attached', timeout: 10_000 });
      return JSON.parse((await page.textContent('#result')) ?? '{}');
    } finally {
      await context.close();
    }
  }

  test('the internal app on the allowed origin reads the plan with its SSO token', async () => {
    const outcome = await outcomeAt(allowed.origin);
    expect(outcome).toMatchObject({ ok: true, status: 200, body: { internalId: PLAN_ID } });
    // X-Request-Id is exposed to the page's script.
    expect(outcome.requestId).toEqual(expect.any(String));
  });

  test('a page from a foreign origin is blocked by the browser, and the gateway sent it no CORS header', async () => {
    const outcome = await outcomeAt(foreign.origin);
    expect(outcome).toEqual({ error: 'TypeError: Failed to fetch' });

    // What the browser got: the same preflight and request, replayed outside it.
    const preflight = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
      method: 'OPTIONS',
      headers: {
        Origin: foreign.origin,
        'Access-Control-Request-Method': 'GET',
        'Access-Control-Request-Headers': 'authorization',
      },
    });
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    const actual = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
      headers: { Origin: foreign.origin, Authorization: `Bearer ${token}` },
    });
    expect(actual.headers.get('access-control-allow-origin')).toBeNull();
    const allowedPreflight = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
      method: 'OPTIONS',
      headers: {
        Origin: allowed.origin,
        'Access-Control-Request-Method': 'GET',
        'Access-Control-Request-Headers': 'authorization',
      },
    });
    expect(allowedPreflight.status).toBe(204);
    expect(allowedPreflight.headers.get('access-control-allow-origin')).toBe(allowed.origin);
  });

  test('the SSO token never shows up in the gateway logs', () => {
    expect(gateway.logs()).not.toContain(token.split('.')[2]);
  });
});
