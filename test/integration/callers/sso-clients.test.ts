// SSO bearer tokens against the real gateway (issue 42): a registry entry limits its SSO client's scopes, a client
// with no entry is refused while the registry lists SSO clients, and an ID token is no access token.
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { startTestIssuer, type TestIssuer } from '../../unit/callers/support/oidc-test-issuer';

const AUDIENCE = 'payments-bff';
const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const BODY = JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } });

let simulator: RunningSimulator;
let issuer: TestIssuer;
let gw: TestGateway;

beforeAll(async () => {
  [simulator, issuer] = await Promise.all([
    startSimulator({ port: 0, username: 'sso-merchant', password: 'sso-password' }),
    startTestIssuer(),
  ]);
  gw = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'sso-merchant',
    UPSTREAM_PASSWORD: 'sso-password',
    OIDC_ISSUER: issuer.issuer,
    OIDC_AUDIENCE: AUDIENCE,
    OIDC_JWKS_URL: issuer.jwksUrl,
    // The issue's registry: an SSO client limited to plans:read.
    CLIENTS_FILE: writeClientsFile([{ id: 'reports-web', keys: [], scopes: ['plans:read'] }]),
  });
});

afterAll(async () => {
  await gw?.close();
  await Promise.all([simulator?.close(), issuer?.close()]);
});

async function call(token: string, method: 'GET' | 'POST') {
  const res = await fetch(gw.url + (method === 'GET' ? PLAN : '/api/validation/document'), {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: method === 'POST' ? BODY : undefined,
  });
  const body = (await res.json()) as { status?: { description?: string } };
  return [res.status, body.status?.description];
}

test("an SSO client gets only the token's scopes its entry lists", async () => {
  const token = await issuer.sign({
    aud: AUDIENCE,
    azp: 'reports-web',
    scope: 'plans:read documents:validate',
  });
  expect((await call(token, 'GET'))[0]).toBe(200);
  expect(await call(token, 'POST')).toEqual([403, 'CLIENT_FORBIDDEN']);
});

test('a client with no entry is refused while the registry lists SSO clients', async () => {
  const token = await issuer.sign({ aud: AUDIENCE, azp: 'stranger-web', scope: 'plans:read' });
  expect(await call(token, 'GET')).toEqual([403, 'CLIENT_FORBIDDEN']);
});

test("an ID token (typ JWT) with the gateway's audience is not taken as an access token", async () => {
  const idToken = await issuer.sign(
    { aud: AUDIENCE, azp: 'reports-web', scope: 'plans:read' },
    { typ: 'JWT' },
  );
  expect(await call(idToken, 'GET')).toEqual([401, 'CLIENT_UNAUTHENTICATED']);
});
