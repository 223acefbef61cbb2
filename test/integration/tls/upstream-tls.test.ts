// The production path over real TLS: the simulator serves HTTPS with a run-time test CA, the gateway trusts it
// through UPSTREAM_CA_FILE, and bad certificates (untrusted, expired, wrong host) fail closed with their cause named.
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { createTestPki, type ServerCertificate, type TestPki } from '../../support/test-certificates';

const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const KEY = 'tls-test-key-0123456789abcdef';
const USERNAME = 'tls-merchant';
const PASSWORD = 'tls-upstream-password';
const auth = { 'x-api-key': KEY };
const validBody = JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } });

let pki: TestPki;
let clientsFile: string;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  pki = await createTestPki();
  clientsFile = writeClientsFile([
    { id: 'tls-client', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
  ]);
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function simulatorWith(tls: ServerCertificate, accessTtlSeconds = 300): Promise<RunningSimulator> {
  const simulator = await startSimulator({
    port: 0,
    username: USERNAME,
    password: PASSWORD,
    tls,
    accessTtlSeconds,
  });
  cleanups.push(() => simulator.close());
  return simulator;
}

async function gatewayFor(
  simulator: RunningSimulator,
  extra: Record<string, string> = {},
): Promise<TestGateway> {
  const gateway = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_CA_FILE: pki.caFile,
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
    ...extra,
  });
  cleanups.push(() => gateway.close());
  return gateway;
}

const getPlan = (gateway: TestGateway) =>
  fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, { headers: auth });
const validate = (gateway: TestGateway) =>
  fetch(`${gateway.url}/api/validation/document`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: validBody,
  });

describe('over TLS with UPSTREAM_CA_FILE', () => {
  test('both operations, login and refresh work against an https upstream signed by the test CA', async () => {
    const simulator = await simulatorWith(pki.good, 3);
    expect(simulator.url).toMatch(/^https:\/\/127\.0\.0\.1:/);
    const gateway = await gatewayFor(simulator, { TOKEN_REFRESH_SKEW_SECONDS: '2' });

    const plan = await getPlan(gateway);
    expect(plan.status).toBe(200);
    expect(await plan.text()).toContain(PLAN_ID);
    const validation = await validate(gateway);
    expect(validation.status).toBe(200);
    expect(simulator.stats()).toMatchObject({ logins: 1, planReads: 1, validations: 1 });

    // A 3 s access token with a 2 s skew: the background refresh runs over TLS within about a second.
    const deadline = Date.now() + 10_000;
    while (simulator.stats().refreshes === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect(simulator.stats().refreshes).toBeGreaterThanOrEqual(1);
    expect(simulator.stats().refreshFailures).toBe(0);
    expect((await getPlan(gateway)).status).toBe(200);
  });

  test('keep-alive: a burst opens no more TLS sessions than sockets', async () => {
    const simulator = await simulatorWith(pki.good);
    const maxSockets = 4;
    const gateway = await gatewayFor(simulator, { UPSTREAM_MAX_SOCKETS: String(maxSockets) });
    await gateway.gateway.tokens.getAccessToken();
    const afterLogin = simulator.secureConnections();
    expect(afterLogin).toBe(1);

    for (let round = 0; round < 3; round += 1) {
      const before = simulator.secureConnections();
      // POSTs: concurrent identical GETs would be coalesced into one upstream call.
      const answers = await Promise.all(Array.from({ length: 40 }, () => validate(gateway)));
      expect(answers.map((a) => a.status)).toEqual(Array(40).fill(200));
      await Promise.all(answers.map((a) => a.arrayBuffer()));
      // 40 concurrent calls over at most 4 pooled sockets: at most one handshake per socket, none per call
      // (even if an idle socket aged out between rounds on a loaded machine).
      expect(simulator.secureConnections() - before).toBeLessThanOrEqual(maxSockets);
    }
    expect(simulator.stats().validations).toBe(120);
    expect(simulator.stats().logins).toBe(1);
  });

  test('without UPSTREAM_CA_FILE the test CA is not trusted: verification is never off', async () => {
    const simulator = await simulatorWith(pki.good);
    const gateway = await gatewayFor(simulator, { UPSTREAM_CA_FILE: '' });
    const answer = await getPlan(gateway);
    expect(answer.status).toBe(502);
    expect(simulator.stats().logins).toBe(0);
  });
});

describe.each([
  ['untrusted', () => pki.untrusted, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'],
  ['expired', () => pki.expired, 'CERT_HAS_EXPIRED'],
  ['wrong-host', () => pki.wrongHost, 'ERR_TLS_CERT_ALTNAME_INVALID'],
])('a %s certificate', (_name, certificate, code) => {
  test('on the token endpoint: 502 UPSTREAM_UNAVAILABLE, no login, the cause logged', async () => {
    const simulator = await simulatorWith(certificate());
    const gateway = await gatewayFor(simulator);
    const answer = await getPlan(gateway);
    expect(answer.status).toBe(502);
    const body = (await answer.json()) as { status: { description: string; detail: string } };
    expect(body.status.description).toBe('UPSTREAM_UNAVAILABLE');
    expect(JSON.stringify(body)).not.toContain(code);
    expect(simulator.stats().logins).toBe(0);
    const line = gateway
      .logs()
      .split('\n')
      .find((l) => l.includes('token login failed') && l.includes(code));
    expect(line).toBeDefined();
    expect(line).not.toContain(PASSWORD);
  });

  test('on a forwarded call: 502 UPSTREAM_UNAVAILABLE and a log line naming the TLS cause', async () => {
    const simulator = await simulatorWith(pki.good);
    const gateway = await gatewayFor(simulator);
    // Log in over the good certificate (the token client's own connection), then the provider's certificate
    // changes: the forwarder's first connection meets it.
    await gateway.gateway.tokens.getAccessToken();
    simulator.useCertificate(certificate());
    const answer = await validate(gateway);
    expect(answer.status).toBe(502);
    expect(((await answer.json()) as { status: { description: string } }).status.description).toBe(
      'UPSTREAM_UNAVAILABLE',
    );
    expect(simulator.stats().validations).toBe(0);
    const line = gateway
      .logs()
      .split('\n')
      .find((l) => l.includes('upstream TLS failure'));
    expect(line).toContain(code);
  });
});
