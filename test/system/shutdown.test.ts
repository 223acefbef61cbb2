// SIGTERM on a real gateway process: readiness 503, no new connections, the in-flight call still answers, exit 0.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import type { RedisClient } from '../../src/store/redis-connection';
import { readUsage, usageLedgerStore } from '../../src/usage';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { API_KEY, gatewayEnv, PASSWORD, PLAN_ID, USERNAME } from '../support/ops-fixture';
import { freePort, waitFor } from '../support/ports';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { tempDir } from '../support/temp-dir';

/** gatewayEnv without PORT/HOST: the process helper picks them. */
function processEnv(upstreamUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  const { PORT: _port, HOST: _host, ...env } = gatewayEnv(upstreamUrl, extra);
  return env;
}

/** Rejects with the network error code (ECONNREFUSED...) when no HTTP answer comes. */
async function statusOrCode(url: string, init?: RequestInit): Promise<number | string> {
  try {
    return (await fetch(url, init)).status;
  } catch (error) {
    return ((error as Error & { cause?: { code?: string } }).cause?.code ?? 'unknown') as string;
  }
}

/** A connection with a GET sent but for its last blank line: already accepted when the signal arrives. */
async function halfSentRequest(port: number, path: string) {
  const { connect } = await import('node:net');
  const socket = connect({ host: '127.0.0.1', port });
  let answer = '';
  socket.on('data', (chunk) => {
    answer += chunk.toString();
  });
  socket.on('error', () => undefined);
  const ended = new Promise<string>((resolve) => socket.on('close', () => resolve(answer)));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: gateway\r\n`);
  return {
    finish(): Promise<string> {
      socket.write('\r\n');
      return ended;
    },
  };
}

function redisClients(redis: RedisServer): number {
  const list = execFileSync('redis-cli', ['-p', String(redis.port), 'CLIENT', 'LIST'], { encoding: 'utf8' });
  return list.split('\n').filter((line) => line.includes('addr=') && !line.includes('cmd=client')).length;
}

describe('graceful shutdown on SIGTERM', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateway: GatewayProcess | undefined;

  beforeAll(async () => {
    redis = await startRedisServer();
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  });

  afterEach(async () => {
    await gateway?.stop('SIGKILL');
    gateway = undefined;
    simulator.setFaults({});
  });

  afterAll(async () => {
    await simulator?.close();
    await redis?.stop();
  });

  const planUrl = (g: GatewayProcess) => `${g.url}/api/subscriptions/plan/${PLAN_ID}`;
  const headers = { 'x-api-key': API_KEY };

  test('a slow call in flight still answers 200; /readyz says 503 on an open connection, new connections are refused; exit 0', async () => {
    const g = await startGatewayProcess({
      env: processEnv(simulator.url, { REDIS_URL: redis.url, SHUTDOWN_TIMEOUT_MS: '10000' }),
    });
    gateway = g;
    expect((await fetch(planUrl(g), { headers })).status).toBe(200);
    expect(redisClients(redis)).toBeGreaterThan(0);

    simulator.setFaults({ latencyMs: 1500 });
    const probe = await halfSentRequest(g.port, '/readyz');
    const started = Date.now();
    const inFlight = fetch(planUrl(g), { headers }).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as { internalId?: string },
      at: Date.now(),
    }));
    await new Promise((r) => setTimeout(r, 200));
    const signalledAt = Date.now();
    g.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 150));

    // A probe whose connection was accepted before the signal gets the draining answer.
    const readiness = await probe.finish();
    expect(readiness).toMatch(/^HTTP\/1\.1 503 /);
    expect(readiness).toContain('"draining":true');
    // The listener is closed: a new connection is refused at the TCP level, not answered with a 5xx.
    expect(await statusOrCode(`${g.url}/readyz`)).toBe('ECONNREFUSED');
    expect(await statusOrCode(planUrl(g), { headers })).toBe('ECONNREFUSED');

    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(answer.body.internalId).toBe(PLAN_ID);
    expect(await g.exited).toBe(0);
    const exitedAt = Date.now();
    // Drain measured: the exit follows the last answer closely, far below SHUTDOWN_TIMEOUT_MS.
    expect(answer.at - started).toBeGreaterThanOrEqual(1500);
    expect(exitedAt - signalledAt).toBeLessThan(4_000);
    expect(exitedAt - answer.at).toBeLessThan(1_500);

    expect(g.logs()).toContain('draining: finishing in-flight requests');
    expect(g.logs()).toContain('"msg":"stopped"');
    // Redis connections (commands and pub/sub) are closed.
    expect(redisClients(redis)).toBe(0);
    expect(await statusOrCode(`${g.url}/healthz`)).toBe('ECONNREFUSED');
  });

  test('a LOG_FILE holds every request line and the last words once the process has exited', async () => {
    const logFile = join(tempDir('bff-shutdown-log-'), 'gateway.log');
    const g = await startGatewayProcess({ env: processEnv(simulator.url, { LOG_FILE: logFile }) });
    gateway = g;
    const requestIds = ['shutdown-log-1', 'shutdown-log-2', 'shutdown-log-3'];
    for (const id of requestIds)
      expect((await fetch(planUrl(g), { headers: { ...headers, 'x-request-id': id } })).status).toBe(200);
    expect(await g.stop('SIGTERM')).toBe(0);

    const lines = readFileSync(logFile, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { msg: string; requestId?: string; status?: number });
    const requests = lines.filter((line) => line.msg === 'request');
    expect(requests.map((line) => [line.requestId, line.status])).toEqual(requestIds.map((id) => [id, 200]));
    expect(lines.at(-1)?.msg).toBe('stopped');
  });

  test('SHUTDOWN_TIMEOUT_MS bounds the drain: a caller slower than the bound is cut, and the process exits 0 once its provider call has ended', async () => {
    const g = await startGatewayProcess({ env: processEnv(simulator.url, { SHUTDOWN_TIMEOUT_MS: '1000' }) });
    gateway = g;
    expect((await fetch(planUrl(g), { headers })).status).toBe(200);
    simulator.setFaults({ latencyMs: 8000 });
    const received = simulator.receivedRequests().length;
    let cutAt = 0;
    const inFlight = statusOrCode(planUrl(g), { headers }).finally(() => {
      cutAt = Date.now();
    });
    await waitFor(() => simulator.receivedRequests().length > received, { what: 'the call at the provider' });
    const signalledAt = Date.now();
    g.child.kill('SIGTERM');
    expect(await g.exited).toBe(0);
    // The caller was cut at the bound, before the process exited: the exit waited for the provider call.
    expect(typeof (await inFlight)).toBe('string');
    expect(cutAt - signalledAt).toBeGreaterThanOrEqual(900);
    expect(cutAt).toBeLessThan(Date.now());
    expect(g.logs()).not.toMatch(/"level":(50|60)/);
  });

  test('a call cut by SHUTDOWN_TIMEOUT_MS while at the provider is still counted in the usage ledger, as the provider counts it', async () => {
    const prefix = `shutdown-ledger-${Date.now()}:`;
    const g = await startGatewayProcess({
      env: processEnv(simulator.url, {
        SHUTDOWN_TIMEOUT_MS: '300',
        REDIS_URL: redis.url,
        REDIS_KEY_PREFIX: prefix,
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      }),
    });
    gateway = g;
    expect((await fetch(planUrl(g), { headers })).status).toBe(200);
    simulator.setFaults({ latencyMs: 2000 });
    const received = simulator.receivedRequests().length;
    const inFlight = statusOrCode(planUrl(g), { headers });
    await waitFor(() => simulator.receivedRequests().length > received, { what: 'the call at the provider' });
    g.child.kill('SIGTERM');
    expect(await g.exited).toBe(0);
    expect(typeof (await inFlight)).toBe('string'); // the caller was cut
    expect(simulator.receivedRequests().length).toBe(received + 1);
    const client = new Redis(redis.url);
    try {
      const today = new Date().toISOString().slice(0, 10);
      const report = await readUsage(usageLedgerStore(client as unknown as RedisClient, prefix), {
        from: today,
        to: today,
      });
      const plan = report.rows.filter((row) => row.operation === 'plan');
      const sum = (column: string) => plan.reduce((n, row) => n + (row.counts[column] ?? 0), 0);
      // Both calls reached the provider and were answered 200 there: both billable, as the provider bills them.
      expect(sum('billable')).toBe(2);
      expect(sum('answers2xx')).toBe(2);
    } finally {
      client.disconnect();
    }
  });

  // The settle after the drain waits one attempt (UPSTREAM_QUEUE_TIMEOUT_MS + the account's timeout). A 401 after the
  // caller was cut started the renewal's retry anyway, for nobody: it outlived the settle, was cut when the
  // account closed, and the provider saw (and bills) a call the ledger counted as a gateway failure.
  test('a 401 answered after the caller was cut by the drain starts no retry: the provider gets nothing the ledger misses', async () => {
    const prefix = `shutdown-401-${Date.now()}:`;
    const g = await startGatewayProcess({
      env: processEnv(simulator.url, {
        SHUTDOWN_TIMEOUT_MS: '300',
        UPSTREAM_QUEUE_TIMEOUT_MS: '0',
        UPSTREAM_TIMEOUT_MS: '2000',
        REDIS_URL: redis.url,
        REDIS_KEY_PREFIX: prefix,
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      }),
    });
    gateway = g;
    expect((await fetch(planUrl(g), { headers })).status).toBe(200);
    // The next call waits 1.5 s at the provider, then is refused 401 (once); a retry would wait 1.5 s too, ending
    // past the settle (0.3 s drain + 0 + 2 s).
    simulator.setFaults({ latencyMs: 1500, errorRate: 1, errorStatus: 401, maxFailures: 1 });
    const received = simulator.receivedRequests().length;
    const inFlight = statusOrCode(planUrl(g), { headers });
    await waitFor(() => simulator.receivedRequests().length > received, { what: 'the call at the provider' });
    g.child.kill('SIGTERM');
    expect(typeof (await inFlight)).toBe('string'); // the caller was cut at 0.3 s
    expect(await g.exited).toBe(0);
    const calls = simulator.receivedRequests().slice(received);
    expect(calls.filter((call) => call.path.startsWith('/api/'))).toHaveLength(1);
    const client = new Redis(redis.url);
    try {
      const today = new Date().toISOString().slice(0, 10);
      const report = await readUsage(usageLedgerStore(client as unknown as RedisClient, prefix), {
        from: today,
        to: today,
      });
      const billable = report.rows
        .filter((row) => row.operation === 'plan')
        .reduce((n, row) => n + (row.counts.billable ?? 0), 0);
      expect(billable).toBe(1); // the first call's 200; the 401 is not billable, and nothing else reached the provider
    } finally {
      client.disconnect();
    }
  });
});

/** `unshare --pid` works here (root, or a user namespace allowed): the gateway can run as PID 1 as in a container. */
function canRunAsPid1(): boolean {
  try {
    execFileSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('SIGTERM during start-up', () => {
  let simulator: RunningSimulator;
  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  });
  const started: ChildProcess[] = [];
  afterEach(() => {
    // A gateway that ignored the signal must not outlive its test (unshare --kill-child takes its child along).
    for (const child of started.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  });
  afterAll(async () => {
    await simulator?.close();
  });

  /** A gateway whose start-up waits for a Redis that is not there (REDIS_START_WAIT_MS: 2 s). */
  async function startingGateway(asPid1: boolean) {
    const env = {
      PATH: process.env.PATH ?? '',
      ...processEnv(simulator.url, { REDIS_URL: `redis://127.0.0.1:${await freePort()}` }),
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
    };
    const main = [process.execPath, '--import', 'tsx', 'src/main.ts'];
    const [command, ...args] = asPid1
      ? ['unshare', '--pid', '--fork', '--kill-child', '--mount-proc', ...main]
      : main;
    const child = spawn(command as string, args, {
      cwd: resolve(__dirname, '..', '..'),
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(child);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    // Bounded: a process that ignores the signal resolves as still running instead of hanging the test.
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null } | 'still running'>(
      (done) => {
        child.once('exit', (code, signal) => done({ code, signal }));
        setTimeout(() => done('still running'), 10_000).unref();
      },
    );
    // The first Redis connection error is logged while start-up waits for Redis: the process is mid-start.
    await waitFor(async () => output.includes('redis unreachable'), {
      timeoutMs: 15_000,
      what: 'the gateway to reach its Redis wait',
      intervalMs: 20,
    });
    return { child, exited, output: () => output };
  }

  test('stops the process at once, before it ever listens, and exits 0', async () => {
    const gateway = await startingGateway(false);
    gateway.child.kill('SIGTERM');
    // Without a handler Node dies of the signal (code null); with it, the gateway says why and exits 0.
    expect(await gateway.exited).toEqual({ code: 0, signal: null });
    expect(gateway.output()).toContain('SIGTERM during start-up: stopping at once');
    expect(gateway.output()).not.toContain('gateway listening');
  });

  const pid1 = canRunAsPid1() ? test : test.skip;
  pid1('as PID 1 (a container without an init): the signal is not ignored', async () => {
    const gateway = await startingGateway(true);
    // The node process is unshare's child and PID 1 of its own namespace: the kernel drops a signal sent to
    // a namespace's init from outside unless init has a handler for it.
    const children = readFileSync(`/proc/${gateway.child.pid}/task/${gateway.child.pid}/children`, 'utf8');
    const nodePid = Number(children.trim().split(/\s+/)[0]);
    expect(nodePid).toBeGreaterThan(0);
    process.kill(nodePid, 'SIGTERM');
    expect(await gateway.exited).toEqual({ code: 0, signal: null });
    expect(gateway.output()).toContain('SIGTERM during start-up: stopping at once');
    expect(gateway.output()).not.toContain('gateway listening');
  });
});
