// A client-registry reload that fails is loud on a real gateway process with a real CLIENTS_FILE: an error log line,
// a counter and a stale-since gauge on /metrics, a degraded /readyz (still 200) naming since when; all clear on a fix.
import { renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ReadinessReport } from '../../src/operations/readiness';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { registryJson, writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { PASSWORD, PLAN_ID, USERNAME } from '../support/ops-fixture';
import { waitFor } from '../support/ports';

const KEPT_KEY = 'registry-reload-kept-key-0123456789';
const REVOKED_KEY = 'registry-reload-revoked-key-0123456789';
const kept = { id: 'kept-app', keys: [KEPT_KEY], scopes: ['plans:read'] };
const revoked = { id: 'revoked-app', keys: [REVOKED_KEY], scopes: ['plans:read'] };

let simulator: RunningSimulator;
let gateway: GatewayProcess;
let clientsFile: string;

/** Replaces the file the way editors and deploy tools do: write aside, rename over. */
function replaceFile(content: string): void {
  const next = join(dirname(clientsFile), 'next.json');
  writeFileSync(next, content);
  renameSync(next, clientsFile);
}

async function readyz(): Promise<{ status: number; body: ReadinessReport }> {
  const res = await fetch(`${gateway.url}/readyz`);
  return { status: res.status, body: (await res.json()) as ReadinessReport };
}

async function metric(name: string, labels = ''): Promise<number | undefined> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

const planStatus = async (key: string) =>
  (await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, { headers: { 'x-api-key': key } })).status;

function logLines(): Record<string, unknown>[] {
  return gateway
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  clientsFile = writeClientsFile([kept, revoked]);
  gateway = await startGatewayProcess({
    env: {
      NODE_ENV: 'test',
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: USERNAME,
      UPSTREAM_PASSWORD: PASSWORD,
      CLIENTS_FILE: clientsFile,
    },
  });
});

afterAll(async () => {
  await gateway?.stop();
  await simulator?.close();
});

describe('a client registry reload that fails', () => {
  it('starts current: readiness ok, gauge 0, no failure counted', async () => {
    const { status, body } = await readyz();
    expect(status).toBe(200);
    expect(body.checks.clientRegistry).toEqual({
      state: 'ok',
      detail: 'the client registry matches CLIENTS_FILE',
    });
    expect(await metric('client_registry_stale_since_seconds')).toBe(0);
    expect(await metric('client_registry_reload_failures_total', '{reason="invalid"}')).toBeUndefined();
  });

  it('a broken file (the revocation of a key with a typo): error log, counter, gauge, degraded readiness', async () => {
    const before = Date.now();
    // The operator revokes a key but leaves a plain key where a hash belongs: the file is refused.
    replaceFile(
      JSON.stringify({
        clients: [{ ...JSON.parse(registryJson([kept])).clients[0], keys: ['oops-plain-key'] }],
      }),
    );
    await waitFor(async () => (await readyz()).body.status === 'degraded', { what: 'degraded readiness' });

    const { status, body } = await readyz();
    expect(status).toBe(200);
    const check = body.checks.clientRegistry;
    expect(check?.state).toBe('degraded');
    const staleSince = Date.parse(check?.staleSince ?? '');
    expect(staleSince).toBeGreaterThanOrEqual(before - 1_000);
    expect(staleSince).toBeLessThanOrEqual(Date.now());
    expect(check?.detail).toContain(check?.staleSince);
    expect(check?.detail).toMatch(/keys removed from the file still work until it is fixed/);
    expect(JSON.stringify(body)).not.toContain('oops-plain-key');

    const errorLine = logLines().find((line) =>
      line.msg?.toString().startsWith('client registry reload refused'),
    );
    expect(errorLine).toMatchObject({ level: 50, reason: 'invalid', staleSince: check?.staleSince });
    expect(JSON.stringify(errorLine)).not.toContain('oops-plain-key');

    expect(await metric('client_registry_reload_failures_total', '{reason="invalid"}')).toBe(1);
    expect(await metric('client_registry_stale_since_seconds')).toBe(staleSince / 1000);

    // The threat the loudness is about: the key meant to be revoked still works.
    expect(await planStatus(REVOKED_KEY)).toBe(200);
    expect(await planStatus(KEPT_KEY)).toBe(200);
  });

  it('fixed: readiness ok and gauge 0 again, the revoked key refused; the counter keeps its history', async () => {
    replaceFile(registryJson([kept]));
    await waitFor(async () => (await readyz()).body.status === 'ready', { what: 'ready after the fix' });
    expect((await readyz()).body.checks.clientRegistry).toEqual({
      state: 'ok',
      detail: 'the client registry matches CLIENTS_FILE',
    });
    expect(await metric('client_registry_stale_since_seconds')).toBe(0);
    expect(await metric('client_registry_reload_failures_total', '{reason="invalid"}')).toBe(1);
    expect(logLines().some((line) => line.msg === 'client registry matches the file again')).toBe(true);
    expect(await planStatus(REVOKED_KEY)).toBe(401);
    expect(await planStatus(KEPT_KEY)).toBe(200);
  });
});
