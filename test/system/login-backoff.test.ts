// Three real gateway processes, one real Redis: a refused login backs off for the whole fleet, growing, and new
// credentials (file rotation + SIGHUP) end it at once.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { tempDir } from '../support/temp-dir';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const API_KEY = `pbk_system-backoff-${randomBytes(12).toString('hex')}`;
const USERNAME = 'backoff-merchant';
const PASSWORD = `backoff-Pw-${randomBytes(6).toString('hex')}`;
const MIN_MS = 400;

jest.setTimeout(120_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Answer {
  readonly status: number;
  readonly reason?: string;
  readonly retryAfter?: string;
}

async function plan(gateway: GatewayProcess): Promise<Answer> {
  const res = await fetch(gateway.url + PLAN, { headers: { 'x-api-key': API_KEY } });
  const body = (await res.json()) as { status?: { description?: string } };
  return {
    status: res.status,
    reason: body.status?.description,
    retryAfter: res.headers.get('retry-after') ?? undefined,
  };
}

async function refusalGauge(gateway: GatewayProcess): Promise<number> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  return Number(
    /upstream_token_backoff_seconds\{kind="refusal",account="default"\} ([\d.]+)/.exec(text)?.[1] ??
      Number.NaN,
  );
}

describe('login back-off across three gateway processes', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateways: GatewayProcess[] = [];
  let passwordFile: string;

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0, username: USERNAME, password: PASSWORD }),
    ]);
    const dir = tempDir('bff-backoff-');
    passwordFile = join(dir, 'password');
    writeFileSync(passwordFile, 'a-wrong-password\n');
    const env = {
      NODE_ENV: 'test',
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: USERNAME,
      UPSTREAM_PASSWORD_FILE: passwordFile,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `backoff-${Date.now()}:`,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      TOKEN_LOGIN_MIN_INTERVAL_MS: String(MIN_MS),
      TOKEN_LOGIN_MAX_INTERVAL_MS: '60000',
      CLIENTS_FILE: writeClientsFile([
        {
          id: 'backoff-test',
          keys: [API_KEY],
          scopes: ['plans:read'],
          rateLimit: { limit: 1_000_000, windowSeconds: 60 },
        },
      ]),
    };
    gateways = await Promise.all([1, 2, 3].map(() => startGatewayProcess({ env, startTimeoutMs: 40_000 })));
  }, 90_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  it('refusals are shared and the wait grows; new credentials end it at once', async () => {
    // Traffic on all three replicas until the provider has seen 4 refused logins. Waits of 400 ms doubling (with
    // jitter) put at least 400 + 800 + 1600 ms between the first and the fourth; unshared back-offs on three
    // replicas, or a fixed 400 ms interval, would get there in about 0.4 s or 1.2 s.
    const answers: Answer[] = [];
    const started = Date.now();
    await Promise.all(
      gateways.map(async (gateway) => {
        while (simulator.stats().loginFailures < 4 && Date.now() - started < 15_000) {
          answers.push(await plan(gateway));
          await sleep(25);
        }
      }),
    );
    const elapsed = Date.now() - started;
    expect(simulator.stats().loginFailures).toBe(4);
    expect(elapsed).toBeGreaterThanOrEqual(MIN_MS * (1 + 2 + 4));
    expect(answers.length).toBeGreaterThan(60);
    expect(new Set(answers.map((a) => `${a.status} ${a.reason}`))).toEqual(
      new Set(['502 UPSTREAM_AUTH_FAILED']),
    );
    expect(answers.every((a) => Number(a.retryAfter) >= 1)).toBe(true);

    // Every replica knows the wait, the ones that never called included; it is now seconds, not 400 ms.
    const gauges = await Promise.all(gateways.map(refusalGauge));
    for (const seconds of gauges) expect(seconds).toBeGreaterThan(0);
    const waiting = await plan(gateways[2]);
    expect(waiting.reason).toBe('UPSTREAM_AUTH_FAILED');
    expect(Number(waiting.retryAfter)).toBeGreaterThanOrEqual(2);
    expect(simulator.stats().loginFailures).toBe(4);

    // Rotation: the right password in the file, SIGHUP to every replica. No one waits out the back-off.
    writeFileSync(passwordFile, `${PASSWORD}\n`);
    for (const gateway of gateways) gateway.child.kill('SIGHUP');
    const rotatedAt = Date.now();
    const served = await Promise.all(
      gateways.map(async (gateway) => {
        for (;;) {
          const answer = await plan(gateway);
          if (answer.status === 200 || Date.now() - rotatedAt > 10_000) return answer.status;
          await sleep(25);
        }
      }),
    );
    expect(served).toEqual([200, 200, 200]);
    expect(Date.now() - rotatedAt).toBeLessThan(Number(waiting.retryAfter) * 1000);
    expect(simulator.stats().logins).toBe(1);
    expect(await Promise.all(gateways.map(refusalGauge))).toEqual([0, 0, 0]);
  });
});
