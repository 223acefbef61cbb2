// A web app's per-user limit: one browser-session user cannot spend the whole app's budget; others keep theirs.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type DevIdentityProvider,
  type DevUser,
  startDevIdentityProvider,
} from '../../../src/dev-identity-provider/dev-identity-provider';
import { startSimulator } from '../../../src/simulator/simulator';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { CookieJar, login, request } from '../../support/oidc-browser';
import { freePort } from '../../support/ports';
import { tempDir } from '../../support/temp-dir';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const ajax = { 'x-csrf': '1' };
const secret = randomBytes(16).toString('hex');
const user = (sub: string): DevUser => ({
  username: sub,
  password: `${sub}-${secret}`,
  sub,
  name: sub,
  email: `${sub}@example.test`,
  groups: ['ops'],
});

let simulator: Awaited<ReturnType<typeof startSimulator>>;
let provider: DevIdentityProvider;
let gateway: TestGateway;

beforeAll(async () => {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  simulator = await startSimulator({ port: 0 });
  provider = await startDevIdentityProvider({
    users: [user('ann'), user('ben')],
    clients: [{ clientId: 'console', clientSecret: secret, origin }],
  });
  const clientsFile = join(tempDir('bff-user-limit-'), 'clients.json');
  writeFileSync(
    clientsFile,
    JSON.stringify({
      clients: [
        {
          id: 'console',
          keys: [],
          scopes: ['plans:read'],
          rateLimit: { limit: 100, windowSeconds: 60 },
          session: {
            claim: 'groups',
            grants: { ops: ['plans:read', 'documents:validate'] },
            userRateLimit: { limit: 3, windowSeconds: 60 },
          },
        },
      ],
    }),
  );
  gateway = await startTestGateway({
    PORT: String(port),
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'sandbox-merchant',
    UPSTREAM_PASSWORD: 'sandbox-password',
    CLIENTS_FILE: clientsFile,
    SESSION_ISSUER: provider.issuer,
    SESSION_CLIENT_ID: 'console',
    SESSION_CLIENT_SECRET: secret,
    SESSION_PUBLIC_URL: origin,
  });
}, 30_000);

afterAll(async () => {
  await gateway?.close();
  await Promise.all([provider?.close(), simulator?.close()]);
});

test('the fourth call of one user is 429 naming the user limit; another user of the same app still passes', async () => {
  const ann = new CookieJar();
  const ben = new CookieJar();
  await login(ann, gateway.url, user('ann'));
  await login(ben, gateway.url, user('ben'));
  const statuses = [];
  for (let i = 0; i < 4; i++)
    statuses.push((await request(ann, `${gateway.url}${PLAN}`, { headers: ajax })).status);
  expect(statuses).toEqual([200, 200, 200, 429]);
  const refused = await request(ann, `${gateway.url}${PLAN}`, { headers: ajax });
  expect(JSON.parse(refused.body).status.detail).toContain('This user of "console"');
  expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
  expect((await request(ben, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(200);
  // The entry's scopes bound what the claim grants: documents:validate is not the app's to give.
  const document = await request(ben, `${gateway.url}/api/validation/document`, {
    method: 'POST',
    body: JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } }),
    headers: { ...ajax, 'content-type': 'application/json' },
  });
  expect(document.status).toBe(403);
  const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
  expect(metrics).toMatch(/rate_limit_rejections_total\{client="console",reason="user-limit"\} 2/);
});
