// Real gateway and doctor processes with NODE_ENV unset: an upstream means production, over real TLS.
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { startGatewayProcess } from '../support/gateway-process';
import { runToExit as runScript } from '../support/run-to-exit';
import { createTestPki, type TestPki } from '../support/test-certificates';

const USERNAME = 'prod-merchant';
const PASSWORD = 'prod-upstream-password-42';
const KEY = 'prod-client-key-0123456789abcdef';

/** The gateway's (or the doctor's) process to its exit, bound to loopback on a free port unless `env` says otherwise. */
function runToExit(script: string, env: Record<string, string>) {
  return runScript(script, { HOST: '127.0.0.1', PORT: '0', ...env });
}

let pki: TestPki;
let good: RunningSimulator;
let clientsFile: string;

beforeAll(async () => {
  pki = await createTestPki();
  good = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD, tls: pki.good });
  clientsFile = writeClientsFile([{ id: 'prod-client', keys: [KEY], scopes: ['plans:read'] }]);
});

afterAll(async () => {
  await good?.close();
});

/** A complete production environment (memory store: one replica) for an https upstream. */
const productionEnv = (url: string) => ({
  UPSTREAM_BASE_URL: url,
  UPSTREAM_CA_FILE: pki.caFile,
  UPSTREAM_USERNAME: USERNAME,
  UPSTREAM_PASSWORD: PASSWORD,
  ALLOW_MEMORY_STORE: 'true',
  METRICS_PORT: '0',
  CLIENTS_FILE: clientsFile,
});

describe('the gateway with an upstream and NODE_ENV unset', () => {
  test('exits non-zero naming each production refusal and its fix, never a secret', async () => {
    const { code, output } = await runToExit('src/main.ts', {
      UPSTREAM_BASE_URL: good.url,
      UPSTREAM_USERNAME: USERNAME,
      UPSTREAM_PASSWORD: PASSWORD,
      REDIS_URL: 'redis://127.0.0.1:1',
      TOKEN_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
      OIDC_ISSUER: 'http://sso.example.com',
      OIDC_AUDIENCE: 'payments-bff',
    });
    expect(code).toBe(1);
    expect(output).toMatch(/METRICS_PORT: is required in production.*METRICS_ON_MAIN_PORT=true/);
    expect(output).toMatch(
      /REDIS_URL: Redis without TLS is refused in production.*REDIS_ALLOW_PLAINTEXT=true/,
    );
    expect(output).toMatch(/OIDC_ISSUER: must be an https URL in production/);
    expect(output).toMatch(/unless NODE_ENV=development or test/);
    expect(output).not.toContain(PASSWORD);
    expect(output).not.toContain(Buffer.alloc(32, 9).toString('base64'));
  });

  test('refuses the development key of config/clients.local.json', async () => {
    const { code, output } = await runToExit('src/main.ts', {
      ...productionEnv(good.url),
      CLIENTS_FILE: 'config/clients.local.json',
    });
    expect(code).toBe(1);
    expect(output).toMatch(/public development key .* refused in production/);
    expect(output).not.toContain('local-dev-key');
  });

  test('serves in production over TLS, trusting the provider CA from UPSTREAM_CA_FILE', async () => {
    const gateway = await startGatewayProcess({ env: { ...productionEnv(good.url), NODE_ENV: '' } });
    try {
      const answer = await fetch(
        `${gateway.url}/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992`,
        {
          headers: { 'x-api-key': KEY },
        },
      );
      expect(answer.status).toBe(200);
      // Production: /metrics is not on the callers' port.
      expect((await fetch(`${gateway.url}/metrics`)).status).toBe(404);
      expect(good.stats().logins).toBeGreaterThanOrEqual(1);
    } finally {
      await gateway.stop();
    }
  });
});

describe('an upstream URL whose scheme is written in capitals', () => {
  test('HTTP:// is refused at start: the credentials never go out in plain text', async () => {
    const plain = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    const env = {
      ...productionEnv(plain.url.replace(/^http:/, 'HTTP:')),
      UPSTREAM_CA_FILE: '',
      NODE_ENV: '',
    };
    // A gateway that starts after all is stopped at once, and the test fails on what it did.
    const started = await startGatewayProcess({ env, waitUntil: 'live' }).then(
      async (gateway) => {
        await gateway.stop();
        return `served, after ${plain.stats().logins} plain-text logins`;
      },
      (error: Error) => error.message,
    );
    await plain.close();
    expect(started).toMatch(/UPSTREAM_BASE_URL: must be https in production/);
    expect(plain.stats().logins).toBe(0);
  });

  test('HTTPS:// is served over TLS', async () => {
    const upstream = good.url.replace(/^https:/, 'HTTPS:');
    const gateway = await startGatewayProcess({ env: { ...productionEnv(upstream), NODE_ENV: '' } });
    try {
      const answer = await fetch(
        `${gateway.url}/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992`,
        { headers: { 'x-api-key': KEY } },
      );
      expect(answer.status).toBe(200);
    } finally {
      await gateway.stop();
    }
  });
});

describe('npm run doctor against TLS upstreams', () => {
  test('trusts UPSTREAM_CA_FILE and passes', async () => {
    const { code, output } = await runToExit('src/operations/doctor-cli.ts', productionEnv(good.url));
    expect(output).toMatch(/✓ upstream token request \(account default\): .* issued a token pair/);
    expect(code).toBe(0);
  });

  test.each([
    [
      'untrusted',
      () => pki.untrusted,
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      /set UPSTREAM_CA_FILE to the provider's CA/,
    ],
    ['expired', () => pki.expired, 'CERT_HAS_EXPIRED', /the provider's certificate expired/],
    [
      'wrong-host',
      () => pki.wrongHost,
      'ERR_TLS_CERT_ALTNAME_INVALID',
      /UPSTREAM_BASE_URL host does not match the certificate/,
    ],
  ])('names a %s certificate and the fix', async (_name, certificate, code, fix) => {
    const simulator = await startSimulator({
      port: 0,
      username: USERNAME,
      password: PASSWORD,
      tls: certificate(),
    });
    try {
      const result = await runToExit('src/operations/doctor-cli.ts', productionEnv(simulator.url));
      expect(result.code).toBe(1);
      expect(result.output).toMatch(
        new RegExp(`✗ upstream token request \\(account default\\): TLS failure .*\\(${code}\\)`),
      );
      expect(result.output).toMatch(fix);
      expect(result.output).not.toContain(PASSWORD);
      expect(simulator.stats().logins).toBe(0);
    } finally {
      await simulator.close();
    }
  });
});
