// Browser sessions with traces on: a real gateway process exporting to a loopback OTLP receiver, a real oidc-provider;
// after a login, calls, a logout and a back-channel logout, no span (nor log line) holds a token, the session id, the
// authorization code, the state, the client secret or the user's identity.
import { randomBytes } from 'node:crypto';
import {
  type DevIdentityProvider,
  type DevUser,
  startDevIdentityProvider,
} from '../../../src/dev-identity-provider/dev-identity-provider';
import { SESSION_COOKIE } from '../../../src/sessions/cookies';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { type GatewayProcess, startGatewayProcess } from '../../support/gateway-process';
import { findSecrets, JWT_PATTERN } from '../../support/leak-scan';
import { CookieJar, loginUntilCallback, request } from '../../support/oidc-browser';
import { attribute, type OtlpReceiver, startOtlpReceiver } from '../../support/otlp-receiver';
import { freePort, waitFor } from '../../support/ports';
import { sessionGatewayEnv, webAppClientsFile } from '../../support/session-gateway';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const CLIENT_ID = 'traced-web-app';
const CLIENT_SECRET = randomBytes(24).toString('base64url');
const user: DevUser = {
  username: 'margarita',
  password: `pw-${randomBytes(9).toString('base64url')}`,
  sub: 'subject-margarita-7731',
  name: 'Margarita Traced',
  email: 'margarita.traced@example.test',
  groups: ['payments-ops'],
};

describe('browser sessions with traces on', () => {
  let receiver: OtlpReceiver;
  let simulator: RunningSimulator;
  let provider: DevIdentityProvider;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    [receiver, simulator, provider] = await Promise.all([
      startOtlpReceiver(),
      startSimulator({ port: 0 }),
      startDevIdentityProvider({
        users: [user],
        clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, origin }],
      }),
    ]);
    const clientsFile = webAppClientsFile({
      id: CLIENT_ID,
      scopes: ['documents:validate', 'plans:read'],
      session: { claim: 'groups', grants: { 'payments-ops': ['documents:validate', 'plans:read'] } },
    });
    gateway = await startGatewayProcess({
      env: {
        PORT: String(port),
        ...sessionGatewayEnv({
          simulatorUrl: simulator.url,
          clientsFile,
          issuer: provider.issuer,
          clientId: CLIENT_ID,
          clientSecret: CLIENT_SECRET,
          publicUrl: origin,
        }),
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '50',
      },
    });
  }, 60_000);

  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([simulator?.close(), provider?.close(), receiver?.close()]);
  });

  it('no span or log line holds a token, the session id, the code, the state, the client secret or the user', async () => {
    const jar = new CookieJar();
    const { callbackUrl } = await loginUntilCallback(jar, gateway.url, user);
    const callback = new URL(callbackUrl);
    expect((await request(jar, callbackUrl)).status).toBe(303);
    const sessionId = jar.get(gateway.url, SESSION_COOKIE) ?? '';
    expect(sessionId).toMatch(/^[\w-]{43}$/);
    const ajax = { 'x-csrf': '1' };
    expect((await request(jar, `${gateway.url}/bff/user`, { headers: ajax })).status).toBe(200);
    expect((await request(jar, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(200);
    expect((await request(jar, `${gateway.url}${PLAN}`)).status).toBe(403);
    expect((await request(jar, `${gateway.url}/bff/logout`, { method: 'POST', headers: ajax })).status).toBe(
      200,
    );
    expect((await request(jar, `${gateway.url}${PLAN}`, { headers: ajax })).status).toBe(401);
    const logoutToken =
      'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJzdWJqZWN0LW1hcmdhcml0YS03NzMxIn0.c2lnbmF0dXJlLW5vdC12YWxpZA';
    const backchannel = await fetch(`${gateway.url}/bff/backchannel-logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: logoutToken }).toString(),
    });
    expect(backchannel.status).toBe(400);

    const routes = [
      '/bff/callback',
      '/bff/user',
      '/api/subscriptions/plan/:internalId',
      '/bff/logout',
      '/bff/backchannel-logout',
    ];
    await waitFor(
      () => routes.every((route) => receiver.spans().some((s) => attribute(s, 'http.route') === route)),
      {
        what: 'the server spans of every session route',
        timeoutMs: 10_000,
      },
    );
    const exported = receiver.bodies().map((text, i) => ({ where: `OTLP export #${i + 1}`, text }));
    const logs = { where: 'gateway logs', text: gateway.logs() };
    expect(
      findSecrets(
        [...exported, logs],
        [
          { name: 'session id', value: sessionId },
          {
            name: 'authorization code',
            value: callback.searchParams.get('code') ?? 'no code in the callback',
          },
          { name: 'state', value: callback.searchParams.get('state') ?? 'no state in the callback' },
          { name: 'client secret', value: CLIENT_SECRET },
          { name: 'user password', value: user.password },
          { name: 'subject', value: user.sub },
          { name: 'email', value: user.email },
          { name: 'name', value: user.name },
          { name: 'logout token', value: logoutToken },
        ],
      ),
    ).toEqual([]);
    for (const { text } of [...exported, logs]) expect(text).not.toMatch(JWT_PATTERN);
  }, 30_000);
});
