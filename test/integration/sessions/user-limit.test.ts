// A web app's per-user limit: one browser-session user cannot spend the whole app's budget; others keep theirs.
import { randomBytes } from 'node:crypto';
import {
  type DevIdentityProvider,
  startDevIdentityProvider,
} from '../../../src/dev-identity-provider/dev-identity-provider';
import { startSimulator } from '../../../src/simulator/simulator';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { CookieJar, login, request } from '../../support/oidc-browser';
import { freePort } from '../../support/ports';
import { devUser, sessionGatewayEnv, webAppClientsFile } from '../../support/session-gateway';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const ajax = { 'x-csrf': '1' };
const secret = randomBytes(16).toString('hex');
const users = { ann: devUser('ann', ['ops']), ben: devUser('ben', ['ops']) };

let simulator: Awaited<ReturnType<typeof startSimulator>>;
let provider: DevIdentityProvider;
let gateway: TestGateway;

beforeAll(async () => {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  simulator = await startSimulator({ port: 0 });
  provider = await startDevIdentityProvider({
    users: [users.ann, users.ben],
    clients: [{ clientId: 'console', clientSecret: secret, origin }],
  });
  const clientsFile = webAppClientsFile({
    id: 'console',
    scopes: ['plans:read'],
    rateLimit: { limit: 100, windowSeconds: 60 },
    session: {
      claim: 'groups',
      grants: { ops: ['plans:read', 'documents:validate'] },
      userRateLimit: { limit: 3, windowSeconds: 60 },
    },
  });
  gateway = await startTestGateway({
    PORT: String(port),
    ...sessionGatewayEnv({
      simulatorUrl: simulator.url,
      clientsFile,
      issuer: provider.issuer,
      clientId: 'console',
      clientSecret: secret,
      publicUrl: origin,
    }),
  });
}, 30_000);

afterAll(async () => {
  await gateway?.close();
  await Promise.all([provider?.close(), simulator?.close()]);
});

test('the fourth call of one user is 429 naming the user limit; another user of the same app still passes', async () => {
  const ann = new CookieJar();
  const ben = new CookieJar();
  await login(ann, gateway.url, users.ann);
  await login(ben, gateway.url, users.ben);
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
