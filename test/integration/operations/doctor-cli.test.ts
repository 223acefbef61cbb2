// `npm run doctor` as a process against a real simulator: each failure named, exit codes, no secret printed.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { freePort } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { PASSWORD, USERNAME } from './fixture';

const ROOT = resolve(__dirname, '..', '..', '..');

function runDoctor(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/operations/doctor-cli.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('exit', (code) => done({ code, output }));
  });
}

const upstreamEnv = (url: string, password = PASSWORD) => ({
  // A plain-http simulator: production rules (NODE_ENV unset with an upstream) would refuse it.
  NODE_ENV: 'test',
  UPSTREAM_BASE_URL: url,
  UPSTREAM_ALLOW_HTTP: 'true',
  UPSTREAM_USERNAME: USERNAME,
  UPSTREAM_PASSWORD: password,
});

function expectNoSecret(output: string, ...secrets: string[]) {
  for (const secret of [USERNAME, PASSWORD, 'eyJ', ...secrets]) expect(output).not.toContain(secret);
}

describe('npm run doctor', () => {
  let simulator: RunningSimulator;
  let fenced: RunningSimulator;
  let redis: RedisServer;

  beforeAll(async () => {
    [simulator, fenced, redis] = await Promise.all([
      startSimulator({ port: 0, username: USERNAME, password: PASSWORD }),
      startSimulator({ port: 0, username: USERNAME, password: PASSWORD, allowedIps: ['10.9.9.9'] }),
      startRedisServer(),
    ]);
  });

  afterAll(async () => {
    await Promise.all([simulator?.close(), fenced?.close(), redis?.stop()]);
  });

  test('good credentials and a reachable Redis: every step ✓, exit 0', async () => {
    const { code, output } = await runDoctor({ ...upstreamEnv(simulator.url), REDIS_URL: redis.url });
    expect(output).toContain('✓ configuration: valid');
    expect(output).toMatch(/✓ token store: Redis at 127\.0\.0\.1:\d+ answered PING/);
    expect(output).toContain('✓ upstream token request');
    expect(output).toContain('All checks passed.');
    expect(code).toBe(0);
    expectNoSecret(output);
  });

  test('a wrong password: non-zero, names the credential problem, never prints it', async () => {
    const wrong = 'Wr0ng-Passw0rd-Value';
    const { code, output } = await runDoctor(upstreamEnv(simulator.url, wrong));
    expect(code).not.toBe(0);
    expect(output).toContain('✗ upstream token request: bad credentials');
    expect(output).toContain('UPSTREAM_USERNAME/UPSTREAM_PASSWORD');
    expect(output).toContain('the configured username and password');
    expectNoSecret(output, wrong);
  });

  test('an IP outside the allow-list: non-zero, tells to whitelist the egress IP', async () => {
    const { code, output } = await runDoctor(upstreamEnv(fenced.url));
    expect(code).not.toBe(0);
    expect(output).toContain('IP not whitelisted');
    expect(output).toContain('whitelist');
    // The local address of the socket is printed (loopback here), with the NAT caveat.
    expect(output).toContain('127.0.0.1');
    expect(output).toContain('NAT');
    expectNoSecret(output);
  });

  test('an unreachable upstream: non-zero, names the refused connection', async () => {
    const closedPort = await freePort();
    const { code, output } = await runDoctor(upstreamEnv(`http://127.0.0.1:${closedPort}`));
    expect(code).not.toBe(0);
    expect(output).toContain('connection refused');
    expect(output).toContain('ECONNREFUSED');
  });

  test('an unreachable Redis fails the store step without printing its password', async () => {
    const closedPort = await freePort();
    const { code, output } = await runDoctor({
      ...upstreamEnv(simulator.url),
      REDIS_URL: `redis://:redis-Secret-42@127.0.0.1:${closedPort}`,
    });
    expect(code).not.toBe(0);
    expect(output).toContain('✗ token store');
    expect(output).toContain('✓ upstream token request');
    expectNoSecret(output, 'redis-Secret-42');
  });

  test('a bad configuration: non-zero, names each bad variable, skips the rest', async () => {
    const { code, output } = await runDoctor({
      ...upstreamEnv('ftp://payments.example'),
      REDIS_URL: 'http://not-redis',
    });
    expect(code).not.toBe(0);
    expect(output).toContain('✗ configuration: invalid');
    expect(output).toContain('UPSTREAM_BASE_URL');
    expect(output).toContain('REDIS_URL');
    expect(output).toContain('- upstream token request: needs a valid configuration');
    expectNoSecret(output);
  });

  test('local mode: the bundled simulator answers with its development credentials', async () => {
    const { code, output } = await runDoctor({});
    expect(output).toContain('memory store (local mode');
    expect(output).toContain('the bundled simulator');
    expect(code).toBe(0);
  });
});
