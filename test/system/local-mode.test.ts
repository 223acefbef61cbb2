// `npm start` with no environment: the gateway runs its real job against the bundled simulator.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { waitFor } from '../support/ports';

const ROOT = resolve(__dirname, '..', '..');
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';

function runMain(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c) => {
      output += c;
    });
    child.stderr.on('data', (c) => {
      output += c;
    });
    child.on('exit', (code) => done({ code, output }));
  });
}

describe('local mode', () => {
  let gateway: GatewayProcess;
  beforeAll(async () => {
    gateway = await startGatewayProcess({ env: {} });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('serves /healthz', async () => {
    const res = await fetch(`${gateway.url}/healthz`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-upstream')).toBe('simulator');
  });

  it('returns the seed plan for the development key, marked X-Upstream: simulator', async () => {
    const res = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
      headers: { 'x-api-key': 'local-dev-key' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-upstream')).toBe('simulator');
    expect(((await res.json()) as { internalId: string }).internalId).toBe(PLAN_ID);
  });

  it('marks error answers too, and refuses a wrong key', async () => {
    const res = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
      headers: { 'x-api-key': 'not-the-key' },
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('x-upstream')).toBe('simulator');
  });

  it('prints a ready-to-paste curl with the development key for each of its two provider accounts', () => {
    for (const account of ['sandbox', 'production'])
      expect(gateway.logs()).toContain(
        `curl -i -H 'X-API-Key: local-dev-key' -H 'X-Upstream-Account: ${account}' localhost:${gateway.port}`,
      );
  });

  it('serves two provider accounts with different credentials; the development key may use both', async () => {
    const answeredBy = async (account?: string) => {
      const res = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
        headers: { 'x-api-key': 'local-dev-key', ...(account && { 'x-upstream-account': account }) },
      });
      expect(res.status).toBe(200);
      return res.headers.get('x-upstream-account');
    };
    expect(await answeredBy()).toBe('sandbox');
    expect(await answeredBy('production')).toBe('production');
    const ready = (await (await fetch(`${gateway.url}/readyz`)).json()) as { checks: { accounts: object } };
    expect(Object.keys(ready.checks.accounts)).toEqual(['sandbox', 'production']);
  });

  it('says where it really listens: loopback, in the banner and the log, with no exposure warning', () => {
    expect(gateway.logs()).toContain(`LOCAL MODE, listening on 127.0.0.1:${gateway.port}`);
    expect(gateway.logs()).toContain(`"listen":"127.0.0.1:${gateway.port}"`);
    expect(gateway.logs()).not.toContain('reachable from the network');
  });

  it('stops cleanly on SIGTERM', async () => {
    expect(await gateway.stop('SIGTERM')).toBe(0);
  });
});

describe('local mode with HOST widened to every interface', () => {
  it('prints the real bind address (not 127.0.0.1) and warns that the development key is reachable', async () => {
    const gateway = await startGatewayProcess({ env: { HOST: '0.0.0.0' }, waitUntil: 'live' });
    try {
      // /healthz answers before the start-up lines are written: wait for the last of them.
      await waitFor(() => gateway.logs().includes('gateway listening'), { what: 'the listening line' });
      const logs = gateway.logs();
      expect(logs).toContain(`LOCAL MODE, listening on 0.0.0.0:${gateway.port}`);
      expect(logs).toContain(`WARNING: 0.0.0.0:${gateway.port} is reachable from the network`);
      expect(logs).toContain(`"listen":"0.0.0.0:${gateway.port}"`);
      expect(logs).toMatch(/"level":40[^\n]*the development key is reachable from the network/);
    } finally {
      expect(await gateway.stop('SIGTERM')).toBe(0);
    }
  });
});

describe('start-up refusals', () => {
  it('refuses local mode when NODE_ENV=production, with a clear message', async () => {
    const { code, output } = await runMain({ NODE_ENV: 'production' });
    expect(code).toBe(1);
    expect(output).toMatch(/UPSTREAM_BASE_URL: is required when NODE_ENV=production/);
  });

  it('exits non-zero naming each bad variable and never printing a secret', async () => {
    const password = 'super-secret-upstream-password';
    const { code, output } = await runMain({
      UPSTREAM_BASE_URL: 'http://api.example.com',
      UPSTREAM_USERNAME: 'merchant',
      UPSTREAM_PASSWORD: password,
      PORT: 'not-a-port',
      TOKEN_ENCRYPTION_KEY: 'short',
    });
    expect(code).toBe(1);
    expect(output).toContain('PORT');
    expect(output).toContain('TOKEN_ENCRYPTION_KEY');
    expect(output).not.toContain(password);
    expect(output).not.toContain('short');
  });
});
