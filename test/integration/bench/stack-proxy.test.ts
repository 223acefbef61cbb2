// The benchmark's stack proxy as a real process in front of the fast upstream: it must do the work it stands for
// (the security headers, the rate limit's headers, the API key, one request line with its latency) and forward, or
// the ceiling it gives for the gateway's throughput would be measured on less work than the gateway's libraries do.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort, waitFor } from '../../support/ports';
import { tempDir } from '../../support/temp-dir';

const ROOT = resolve(__dirname, '..', '..', '..');
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const API_KEY = 'stack-proxy-test-key';
const children: ChildProcess[] = [];

interface Running {
  readonly child: ChildProcess;
  output(): string;
}

async function run(script: string, env: Record<string, string>, ready: string): Promise<Running> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  await waitFor(() => output.includes(ready), { timeoutMs: 20_000, what: script });
  return { child, output: () => output };
}

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

it('forwards a keyed call with the security and rate-limit headers, logs it, and refuses a call without the key', async () => {
  const upstreamPort = await freePort();
  await run('bench/lib/fast-upstream.ts', { FAST_PORT: String(upstreamPort) }, 'listening on');
  const port = await freePort();
  const logFile = join(tempDir('stack-proxy-'), 'stack.log');
  const proxy = await run(
    'bench/stack-proxy.ts',
    {
      BARE_PORT: String(port),
      BARE_TARGET: `http://127.0.0.1:${upstreamPort}`,
      BARE_TOKEN: 'bench.token.x',
      STACK_API_KEY: API_KEY,
      STACK_LOG_FILE: logFile,
    },
    'listening on',
  );
  const url = `http://127.0.0.1:${port}/api/subscriptions/plan/${PLAN_ID}`;

  const refused = await fetch(url);
  expect(refused.status).toBe(401);
  await refused.arrayBuffer();

  const answer = await fetch(url, { headers: { 'x-api-key': API_KEY } });
  expect(answer.status).toBe(200);
  expect(((await answer.json()) as { internalId: string }).internalId).toBe(PLAN_ID);
  expect(answer.headers.get('content-security-policy')).toBe("default-src 'none';frame-ancestors 'none'");
  expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
  expect(answer.headers.get('ratelimit')).toMatch(/^limit=1000000000, remaining=\d+, reset=\d+$/);

  // At exit the batched log reaches the file and the proxy prints how many latencies its histogram holds: one line
  // and one observation per call, the refused one included.
  proxy.child.kill('SIGTERM');
  await waitFor(() => proxy.child.exitCode !== null, { timeoutMs: 10_000, what: 'stack-proxy exit' });
  expect(proxy.output()).toContain('stack-proxy observed 2 request latencies');
  expect(existsSync(logFile)).toBe(true);
  const lines = readFileSync(logFile, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { msg: string; status: number; latencyMs: number });
  expect(lines.map((line) => [line.msg, line.status])).toEqual([
    ['request', 401],
    ['request', 200],
  ]);
  for (const line of lines) expect(line.latencyMs).toBeGreaterThanOrEqual(0);
});
