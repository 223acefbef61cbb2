// The benchmark's minimal upstream as a real process: the answers the gateway needs (tokens with a readable expiry,
// both operations), its counters, and HTTPS with the throwaway CA (trusted only when given the CA).
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { resolve } from 'node:path';
import { makeThrowawayCertificates } from '../../../bench/lib/throwaway-ca';
import { tokenExpiresAt } from '../../../src/tokens/internal/jwt-expiry';
import { freePort, waitFor } from '../../support/ports';
import { tempDir } from '../../support/temp-dir';

const ROOT = resolve(__dirname, '..', '..', '..');
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const children: ChildProcess[] = [];

async function startFastUpstream(env: Record<string, string> = {}): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/lib/fast-upstream.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', FAST_PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  await waitFor(() => output.includes('listening on'), { timeoutMs: 20_000, what: 'fast-upstream' });
  return /listening on (\S+)/.exec(output)?.[1] ?? '';
}

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

it('answers the token endpoints and both operations with fixed JSON, and counts them', async () => {
  const url = await startFastUpstream();
  const post = (path: string, body: unknown) =>
    fetch(url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  const login = await post('/api/token/', { username: 'any', password: 'any' });
  const pair = (await login.json()) as { access: string; refresh: string };
  // The gateway reads the access token's expiry: a day ahead, not the 5-minute fallback.
  expect(tokenExpiresAt(pair.access, 300, Date.now()) - Date.now()).toBeGreaterThan(86_000_000);
  expect(typeof pair.refresh).toBe('string');
  expect(await (await post('/api/token/refresh/', { refresh: pair.refresh })).json()).toHaveProperty(
    'access',
  );

  const plan = await fetch(`${url}/api/subscriptions/plan/${PLAN_ID}`);
  expect(plan.status).toBe(200);
  expect(((await plan.json()) as { internalId: string }).internalId).toBe(PLAN_ID);
  const unknown = await fetch(`${url}/api/subscriptions/plan/00000000-0000-4000-8000-000000000000`);
  expect(unknown.status).toBe(404);
  await unknown.arrayBuffer();
  const validation = await post('/api/validation/document', { country: 'ARG' });
  expect(await validation.json()).toEqual({ code: '200', description: 'Valid id and type document' });

  const stats = (await (await fetch(`${url}/__simulator/stats`)).json()) as { connections: number };
  expect(stats).toEqual({
    requests: 5,
    planReads: 2,
    validations: 1,
    logins: 1,
    refreshes: 1,
    tlsHandshakes: 0,
    connections: expect.any(Number),
  });
  // fetch keeps its connections alive: the six calls above did not open one each.
  expect(stats.connections).toBeGreaterThanOrEqual(1);
  expect(stats.connections).toBeLessThan(6);
});

it('serves HTTPS with the throwaway CA: trusted with the CA, refused without it', async () => {
  const certificates = makeThrowawayCertificates(tempDir('fast-upstream-tls-'));
  const url = await startFastUpstream({
    FAST_CERT_FILE: certificates.certFile,
    FAST_KEY_FILE: certificates.keyFile,
  });
  expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  const get = (ca?: Buffer) =>
    new Promise<number>((resolveStatus, reject) => {
      const req = httpsRequest(`${url}/__simulator/stats`, { ca, agent: false }, (res) => {
        res.resume();
        resolveStatus(res.statusCode ?? 0);
      });
      req.once('error', reject);
      req.end();
    });
  expect(await get(readFileSync(certificates.caFile))).toBe(200);
  await expect(get()).rejects.toMatchObject({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
  // Each fresh connection (agent: false) was one TLS session; the refused one never completed its handshake.
  const stats = await new Promise<{ tlsHandshakes: number }>((resolveStats, reject) => {
    const req = httpsRequest(
      `${url}/__simulator/stats`,
      { ca: readFileSync(certificates.caFile), agent: false },
      (res) => {
        let body = '';
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolveStats(JSON.parse(body)));
      },
    );
    req.once('error', reject);
    req.end();
  });
  expect(stats.tlsHandshakes).toBe(2);
});
