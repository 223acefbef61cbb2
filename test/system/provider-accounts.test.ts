// Several provider accounts in one fleet: three real gateway processes, one real Redis, the simulator holding four
// merchant accounts, and an accounts file changed while load runs.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { tempDir } from '../support/temp-dir';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const KEY = `pbk_accounts-${randomBytes(12).toString('hex')}`;
const OTHER_KEY = `pbk_accounts-other-${randomBytes(12).toString('hex')}`;
const ACCESS_TTL_SECONDS = 4;
const SKEW_SECONDS = 2;
/** username and password of each merchant account the simulator holds. */
const MERCHANTS = {
  sandbox: ['acct-sandbox-user', `sandbox-${randomBytes(6).toString('hex')}`],
  production: ['acct-production-user', `production-${randomBytes(6).toString('hex')}`],
  broken: ['acct-broken-user', `broken-${randomBytes(6).toString('hex')}`],
  added: ['acct-added-user', `added-${randomBytes(6).toString('hex')}`],
} as const;
type Merchant = keyof typeof MERCHANTS;

jest.setTimeout(180_000);

describe('provider accounts: a fleet of three replicas serving several accounts', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateways: GatewayProcess[] = [];
  const dir = tempDir('bff-accounts-');
  const accountsFile = join(dir, 'accounts.json');
  const secret = (name: string, value: string) => {
    const file = join(dir, name);
    writeFileSync(file, value);
    return file;
  };
  const entry = (id: string, merchant: Merchant, password: string = MERCHANTS[merchant][1]) => ({
    id,
    baseUrl: simulator.url,
    usernameFile: secret(`${id}-username`, MERCHANTS[merchant][0]),
    passwordFile: secret(`${id}-password`, password),
  });
  const writeAccounts = (accounts: object[]) => writeFileSync(accountsFile, JSON.stringify({ accounts }));

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({
        port: 0,
        username: MERCHANTS.sandbox[0],
        password: MERCHANTS.sandbox[1],
        extraAccounts: (['production', 'broken', 'added'] as const).map((m) => ({
          username: MERCHANTS[m][0],
          password: MERCHANTS[m][1],
        })),
        accessTtlSeconds: ACCESS_TTL_SECONDS,
      }),
    ]);
    writeAccounts([
      entry('sandbox', 'sandbox'),
      entry('production', 'production'),
      // The operator typed the wrong password for this one.
      entry('broken', 'broken', 'not-the-password'),
    ]);
    const clientsFile = writeClientsFile([
      {
        id: 'accounts-test',
        keys: [KEY],
        scopes: ['plans:read', 'documents:validate'],
        rateLimit: { limit: 1_000_000, windowSeconds: 60 },
        accounts: ['sandbox', 'production', 'broken', 'added'],
      },
      {
        id: 'accounts-other',
        keys: [OTHER_KEY],
        scopes: ['plans:read'],
        rateLimit: { limit: 1_000_000, windowSeconds: 60 },
        accounts: ['production'],
      },
    ]);
    const env = {
      NODE_ENV: 'test',
      UPSTREAM_ACCOUNTS_FILE: accountsFile,
      UPSTREAM_ALLOW_HTTP: 'true',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `accounts-${Date.now()}:`,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      TOKEN_REFRESH_SKEW_SECONDS: String(SKEW_SECONDS),
      TOKEN_LOGIN_MIN_INTERVAL_MS: '1000',
      CLIENTS_FILE: clientsFile,
      LOG_LEVEL: 'info',
    };
    gateways = await Promise.all([1, 2, 3].map(() => startGatewayProcess({ env, startTimeoutMs: 60_000 })));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  const call = async (gateway: GatewayProcess, account?: string, key = KEY, requestId?: string) => {
    try {
      const response = await fetch(gateway.url + PLAN, {
        headers: {
          'X-API-Key': key,
          ...(account !== undefined && { 'X-Upstream-Account': account }),
          ...(requestId && { 'X-Request-Id': requestId }),
        },
      });
      const body = (await response.json()) as { status?: { description?: string; detail?: string } };
      return { status: response.status, answeredBy: response.headers.get('x-upstream-account'), body };
    } catch {
      return { status: 599, answeredBy: null, body: {} };
    }
  };
  const accountStats = (merchant: Merchant) =>
    simulator.stats().accounts[MERCHANTS[merchant][0]] ?? {
      logins: 0,
      loginFailures: 0,
      refreshes: 0,
      calls: 0,
    };

  test('a cold burst on two accounts costs one login per account, each answer naming its account', async () => {
    const burst = await Promise.all(
      Array.from({ length: 120 }, (_, i) => call(gateways[i % 3]!, i % 2 === 0 ? 'sandbox' : 'production')),
    );
    expect(burst.filter((r) => r.status !== 200)).toEqual([]);
    expect(burst.every((r, i) => r.answeredBy === (i % 2 === 0 ? 'sandbox' : 'production'))).toBe(true);
    expect(accountStats('sandbox').logins).toBe(1);
    expect(accountStats('production').logins).toBe(1);
    // Without the header, the client's default: the first account it lists.
    expect((await call(gateways[0]!)).answeredBy).toBe('sandbox');
  });

  test("the provider's own log shows every forwarded call carried its own account's token", async () => {
    await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const account = i % 2 === 0 ? 'sandbox' : 'production';
        return call(gateways[i % 3]!, account, KEY, `carried-${account}-${i}`);
      }),
    );
    const seen = simulator
      .receivedRequests()
      .filter((r) => String(r.headers['x-request-id']).startsWith('carried-'));
    // Coalescing may let one upstream call serve several callers of one account, never of two accounts.
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const request of seen) {
      const account = String(request.headers['x-request-id']).split('-')[1] as Merchant;
      expect(request.account).toBe(MERCHANTS[account][0]);
    }
  });

  test('steady load with one password refused: the others see 0 errors and one refresh per lifetime; the broken one backs off', async () => {
    const before = { sandbox: accountStats('sandbox'), production: accountStats('production') };
    const brokenBefore = accountStats('broken');
    const durationMs = 3 * ACCESS_TTL_SECONDS * 1000;
    const end = Date.now() + durationMs;
    const good: number[] = [];
    const broken: { status: number; reason?: string }[] = [];
    await Promise.all(
      gateways.flatMap((gateway) => [
        (async () => {
          for (let i = 0; Date.now() < end; i++) {
            good.push((await call(gateway, i % 2 === 0 ? 'sandbox' : 'production')).status);
            await new Promise((r) => setTimeout(r, 20));
          }
        })(),
        (async () => {
          while (Date.now() < end) {
            const answer = await call(gateway, 'broken');
            broken.push({ status: answer.status, reason: answer.body.status?.description });
            await new Promise((r) => setTimeout(r, 20));
          }
        })(),
      ]),
    );
    expect(good.length).toBeGreaterThan(100);
    expect(good.filter((s) => s !== 200)).toEqual([]);
    const cycles = Math.ceil(durationMs / ((ACCESS_TTL_SECONDS - 1 - SKEW_SECONDS * 1.1) * 1000));
    for (const merchant of ['sandbox', 'production'] as const) {
      const after = accountStats(merchant);
      expect(after.logins - before[merchant].logins).toBe(0);
      expect(after.refreshes - before[merchant].refreshes).toBeGreaterThanOrEqual(2);
      expect(after.refreshes - before[merchant].refreshes).toBeLessThanOrEqual(cycles + 1);
    }
    // The broken account's callers are told why; its login attempts are spaced by the fleet-wide back-off
    // (1 s, 2 s, 4 s, 8 s...): a handful in 12 s for the whole fleet, not one per request.
    expect(broken.length).toBeGreaterThan(30);
    expect(new Set(broken.map((b) => `${b.status} ${b.reason}`))).toEqual(
      new Set(['502 UPSTREAM_AUTH_FAILED']),
    );
    const attempts = accountStats('broken').loginFailures - brokenBefore.loginFailures;
    expect(attempts).toBeGreaterThanOrEqual(1);
    expect(attempts).toBeLessThanOrEqual(6);
    // Every replica stays ready (production must not leave the load balancer over the broken account), and says why.
    for (const gateway of gateways) {
      const response = await fetch(`${gateway.url}/readyz`);
      const report = (await response.json()) as { checks: { accounts: Record<string, { state: string }> } };
      expect(response.status).toBe(200);
      expect(report.checks.accounts.broken?.state).toBe('failing');
      expect(report.checks.accounts.production?.state).toBe('ok');
    }
    // The fleet's single flight lets any one replica make a given attempt: the refusals are counted across the fleet.
    const pattern =
      /upstream_token_requests_total\{kind="login",result="upstream_auth_failed",account="broken"\} (\d+)/;
    let counted = 0;
    for (const gateway of gateways) {
      const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
      counted += Number(pattern.exec(metrics)?.[1] ?? 0);
    }
    expect(counted).toBeGreaterThanOrEqual(1);
  });

  test('hostile X-Upstream-Account values: a clear 4xx each, never a crash and never another account', async () => {
    const gateway = gateways[0]!;
    const refused = async (value: string, key = KEY) => {
      const answer = await call(gateway, value, key);
      return `${answer.status} ${answer.body.status?.description} ${answer.answeredBy}`;
    };
    // Forwarded calls only: the broken account's back-off may still send a login meanwhile.
    const forwarded = () => {
      const stats = simulator.stats();
      return stats.planReads + stats.validations + stats.unauthorized + stats.forbidden;
    };
    const before = forwarded();
    expect(await refused('')).toBe('400 INVALID_REQUEST null');
    expect(await refused('a'.repeat(65))).toBe('400 INVALID_REQUEST null');
    expect(await refused('x'.repeat(8000))).toBe('400 INVALID_REQUEST null');
    expect(await refused('Sandbox')).toBe('400 INVALID_REQUEST null');
    expect(await refused('sandbox, production')).toBe('400 INVALID_REQUEST null');
    expect(await refused('sandbox\u00e9')).toBe('400 INVALID_REQUEST null');
    // Another client's account and an account nobody has: the same answer, nothing to enumerate.
    const foreign = await call(gateway, 'sandbox', OTHER_KEY);
    const unknown = await call(gateway, 'does-not-exist', OTHER_KEY);
    expect([foreign.status, unknown.status]).toEqual([403, 403]);
    expect(foreign.body.status).toEqual(unknown.body.status);
    expect(foreign.answeredBy).toBeNull();
    // Raw bytes a fetch would not send: UTF-8 beyond Latin-1, and the header twice.
    expect(await rawStatus(gateway.port, ['X-Upstream-Account: sandbox\u2603'])).toBe(400);
    expect(
      await rawStatus(gateway.port, ['X-Upstream-Account: sandbox', 'X-Upstream-Account: production']),
    ).toBe(400);
    // Refusals cost the provider nothing.
    expect(forwarded()).toBe(before);
    expect((await call(gateway, 'production', OTHER_KEY)).status).toBe(200);
  });

  test('adding, changing and removing accounts while load runs: every replica follows, untouched accounts never fail', async () => {
    let running = true;
    const untouched: number[] = [];
    const load = Promise.all(
      gateways.map(async (gateway) => {
        while (running) {
          untouched.push((await call(gateway, 'sandbox')).status);
          await new Promise((r) => setTimeout(r, 20));
        }
      }),
    );
    const everyReplica = async (account: string, expected: number, what: string) => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const statuses = await Promise.all(gateways.map((g) => call(g, account)));
        if (statuses.every((s) => s.status === expected)) return Date.now();
        if (Date.now() > deadline)
          throw new Error(`${what}: replicas answered ${statuses.map((s) => s.status).join(', ')}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const sandbox = entry('sandbox', 'sandbox');
    const production = entry('production', 'production');
    const broken = entry('broken', 'broken', 'not-the-password');
    try {
      expect((await call(gateways[0]!, 'added')).status).toBe(503);
      let started = Date.now();
      writeAccounts([sandbox, production, broken, entry('added', 'added')]);
      const addedAfter = (await everyReplica('added', 200, 'added account')) - started;

      // Changed: the broken account's password file now holds the right password, under a new path.
      started = Date.now();
      const fixed = { ...broken, passwordFile: secret('broken-password-fixed', MERCHANTS.broken[1]) };
      writeAccounts([sandbox, production, fixed, entry('added', 'added')]);
      const changedAfter = (await everyReplica('broken', 200, 'changed account')) - started;

      started = Date.now();
      writeAccounts([sandbox, production, fixed]);
      const removedAfter = (await everyReplica('added', 503, 'removed account')) - started;
      const gone = await call(gateways[1]!, 'added');
      expect(gone.body.status).toEqual({
        code: '503',
        description: 'UPSTREAM_UNAVAILABLE',
        detail: expect.stringContaining('"added" is no longer configured'),
      });
      console.log(
        `accounts followed by 3 replicas: added ${addedAfter} ms, changed ${changedAfter} ms, removed ${removedAfter} ms`,
      );
      for (const ms of [addedAfter, changedAfter, removedAfter]) expect(ms).toBeLessThan(10_000);

      // An invalid file keeps the last good set; the error is logged and counted.
      writeFileSync(accountsFile, JSON.stringify({ accounts: [{ ...sandbox, password: 'inline' }] }));
      await new Promise((r) => setTimeout(r, 6_000));
      expect((await call(gateways[2]!, 'production')).status).toBe(200);
      const metrics = await (await fetch(`${gateways[2]!.url}/metrics`)).text();
      expect(metrics).toMatch(/upstream_accounts_reload_failures_total\{reason="invalid"\} [1-9]/);
    } finally {
      running = false;
      await load;
    }
    expect(untouched.length).toBeGreaterThan(100);
    expect(untouched.filter((s) => s !== 200)).toEqual([]);
  });

  test('no credential or token appears in any replica log, and each log line names its account', () => {
    for (const gateway of gateways) {
      const logs = gateway.logs();
      for (const [, password] of Object.values(MERCHANTS)) expect(logs).not.toContain(password);
      expect(logs).not.toContain('not-the-password');
      expect(logs).not.toMatch(/eyJ[\w-]+\.eyJ/);
      expect(logs).toMatch(/"account":"production"[^\n]*"msg":"request"/);
    }
  });
});

/** The status of a plan read sent as raw bytes (header lines no HTTP client would build). */
function rawStatus(port: number, headerLines: readonly string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (match) {
        socket.destroy();
        resolve(Number(match[1]));
      }
    });
    socket.on('error', reject);
    const head = [
      `GET ${PLAN} HTTP/1.1`,
      'Host: 127.0.0.1',
      `X-API-Key: ${KEY}`,
      ...headerLines,
      'Connection: close',
    ];
    socket.end(Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'utf8'));
  });
}
