// The provider budget and the client quotas in the request path: three real gateway processes, one real Redis, the
// simulator playing two merchant accounts; the ledger read back from Redis after a graceful stop.
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import type { RedisClient } from '../../src/store/redis-connection';
import { periodAt, readUsage, usageLedgerStore } from '../../src/usage';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { runToExit } from '../support/run-to-exit';
import { tempDir } from '../support/temp-dir';

jest.setTimeout(180_000);

const PLAN = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const VALID_BODY = JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } });
const CRITICAL_KEY = `pbk_critical-${randomBytes(12).toString('hex')}`;
const SHEDDABLE_KEY = `pbk_sheddable-${randomBytes(12).toString('hex')}`;
const METERED_KEY = `pbk_metered-${randomBytes(12).toString('hex')}`;
const MERCHANTS = {
  budgeted: ['acct-budgeted-user', `budgeted-${randomBytes(6).toString('hex')}`],
  metered: ['acct-metered-user', `metered-${randomBytes(6).toString('hex')}`],
} as const;
/** The budgeted account's provider limit, fleet-wide. */
const BUDGET = 40;
const QUOTA = 200;
const TIME_ZONE = 'America/Sao_Paulo';
const PREFIX = `wire-${Date.now()}:`;

interface Outcome {
  readonly at: number;
  readonly status: number;
  readonly reason?: string;
  readonly retryAfter: string | null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('provider budget and quotas over a fleet of three replicas', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateways: GatewayProcess[] = [];
  const dir = tempDir('bff-wire-');
  let env: Record<string, string> = {};

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({
        port: 0,
        username: MERCHANTS.budgeted[0],
        password: MERCHANTS.budgeted[1],
        extraAccounts: [{ username: MERCHANTS.metered[0], password: MERCHANTS.metered[1] }],
      }),
    ]);
    const secret = (name: string, value: string) => {
      writeFileSync(join(dir, name), value);
      return join(dir, name);
    };
    const account = (id: keyof typeof MERCHANTS, extra: object = {}) => ({
      id,
      baseUrl: simulator.url,
      usernameFile: secret(`${id}-username`, MERCHANTS[id][0]),
      passwordFile: secret(`${id}-password`, MERCHANTS[id][1]),
      ...extra,
    });
    const accountsFile = join(dir, 'accounts.json');
    writeFileSync(
      accountsFile,
      JSON.stringify({
        accounts: [
          // The burst is part of the 5 %: a twentieth of a second of budget (the default, written out).
          account('budgeted', { budget: { requestsPerSecond: BUDGET, burst: BUDGET / 20 } }),
          account('metered'),
        ],
      }),
    );
    const generous = { limit: 1_000_000, windowSeconds: 60 };
    const clientsFile = writeClientsFile([
      {
        id: 'checkout',
        keys: [CRITICAL_KEY],
        scopes: ['documents:validate', 'plans:read'],
        rateLimit: generous,
        accounts: ['budgeted'],
        priority: 'critical',
      },
      {
        id: 'batch',
        keys: [SHEDDABLE_KEY],
        scopes: ['documents:validate'],
        rateLimit: generous,
        accounts: ['budgeted'],
        priority: 'sheddable',
      },
      {
        id: 'metered',
        keys: [METERED_KEY],
        scopes: ['plans:read'],
        rateLimit: generous,
        accounts: ['metered'],
        quota: { day: QUOTA, timezone: TIME_ZONE },
      },
    ]);
    env = {
      UPSTREAM_ACCOUNTS_FILE: accountsFile,
      UPSTREAM_ALLOW_HTTP: 'true',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: PREFIX,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CLIENTS_FILE: clientsFile,
      PLAN_CACHE_TTL_SECONDS: '300',
      LOG_LEVEL: 'warn',
    };
    gateways = await Promise.all([1, 2, 3].map(() => startGatewayProcess({ env, startTimeoutMs: 60_000 })));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  const send = async (
    gateway: GatewayProcess,
    key: string,
    path: string,
    post: boolean,
  ): Promise<Outcome> => {
    try {
      const res = await fetch(gateway.url + path, {
        method: post ? 'POST' : 'GET',
        headers: { 'x-api-key': key, ...(post && { 'content-type': 'application/json' }) },
        body: post ? VALID_BODY : undefined,
      });
      const body = (await res.json()) as { status?: { description?: string } };
      const reason = res.status >= 400 ? body.status?.description : undefined;
      return { at: Date.now(), status: res.status, reason, retryAfter: res.headers.get('retry-after') };
    } catch {
      return { at: Date.now(), status: 599, retryAfter: null };
    }
  };
  /** A client's calls spread unevenly: `weights` (tenths) of them to replicas 0, 1 and 2. */
  /**
   * Request i goes to a replica in these proportions (out of 10), interleaved (smooth weighted round robin): a load
   * balancer's spread, never the same replica several times in a row. In blocks (4 to the first, then 3, then 3),
   * each replica took bunches of calls at several times its rate, which its share of a small burst (the account's
   * burst is 2: 40/s over 3 replicas) refuses by design (docs/provider-budget.md, known limits).
   */
  const spread = (weights: readonly [number, number, number]) => {
    const order: number[] = [];
    const current = [0, 0, 0];
    for (let slot = 0; slot < 10; slot++) {
      for (let r = 0; r < 3; r++) current[r] = (current[r] as number) + weights[r];
      const next = current.indexOf(Math.max(...current));
      current[next] = (current[next] as number) - 10;
      order.push(next);
    }
    return (i: number) => gateways[order[i % 10] as number] as GatewayProcess;
  };
  const EVEN = spread([4, 3, 3]);
  /** Open-loop load: `perSecond` validations of `key` for `ms` (in 10 ms steps), whatever the answers take. */
  const drive = async (
    key: string,
    perSecond: number,
    ms: number,
    replicaOf: (i: number) => GatewayProcess = EVEN,
  ): Promise<Outcome[]> => {
    const pending: Promise<Outcome>[] = [];
    const start = Date.now();
    for (let i = 0; Date.now() - start < ms; ) {
      const due = ((Date.now() - start) * perSecond) / 1000;
      for (; i < due; i++) pending.push(send(replicaOf(i), key, '/api/validation/document', true));
      await sleep(10);
    }
    return Promise.all(pending);
  };
  const callsPerSecond = async () =>
    (await (await fetch(`${simulator.url}/__simulator/calls-per-second`)).json()) as {
      second: number;
      calls: number;
    }[];

  test('demand at 4x the budget: the provider sees at most the budget + 5 % in every second after the first, critical gets >= 95 % 2xx, sheddable the rest and 429s', async () => {
    const started = Date.now();
    const [critical, sheddable] = await Promise.all([
      // As the budget's own fleet test: critical on two replicas (30 % / 70 %), sheddable mostly on the first.
      drive(CRITICAL_KEY, 30, 8_000, spread([0, 3, 7])),
      drive(SHEDDABLE_KEY, 130, 8_000, spread([8, 2, 0])),
    ]);
    // Every whole second of the provider's clock after the first (partial) one of the run; the last (partial) left out.
    const all = await callsPerSecond();
    const seconds = all.filter(
      (s) => s.second >= Math.floor(started / 1000) + 1 && (s.second + 1) * 1000 < Date.now(),
    );
    const first = all.find((s) => s.second === Math.floor(started / 1000));
    const criticalOk = critical.filter((o) => o.status === 200).length / critical.length;
    const refusedAt = critical.filter((o) => o.status !== 200).map((o) => o.at - started);
    const sheddableStatuses = [...new Set(sheddable.map((o) => `${o.status} ${o.reason ?? ''}`))].sort();
    console.log(
      `budget ${BUDGET}/s, demand ~160/s: provider per second ${JSON.stringify(seconds.map((s) => s.calls))} (first partial ${
        first?.calls ?? 0
      }); critical ${critical.length} sent, ${(criticalOk * 100).toFixed(1)} % 200; sheddable ${sheddable.length} sent, ${
        sheddable.filter((o) => o.status === 200).length
      } 200; critical refused at ms ${refusedAt}`,
    );
    const budgetLines = gateways.flatMap((g) =>
      g
        .logs()
        .split('\n')
        .filter((l) => /budget/.test(l)),
    );
    if (budgetLines.length > 0) console.log(budgetLines.slice(0, 10).join('\n'));
    expect(seconds.length).toBeGreaterThanOrEqual(6);
    for (const s of seconds) expect(s.calls).toBeLessThanOrEqual(BUDGET * 1.05);
    expect(criticalOk).toBeGreaterThanOrEqual(0.95);
    expect(sheddableStatuses.every((s) => s === '200 ' || s === '429 UPSTREAM_BUDGET_EXHAUSTED')).toBe(true);
    expect(sheddable.some((o) => o.status === 429 && Number(o.retryAfter) >= 1)).toBe(true);
  });

  test('one provider 429 with Retry-After: 3 pauses the account fleet-wide; callers get 503 with Retry-After', async () => {
    await sleep(1_500);
    simulator.setFaults({ next429RetryAfterSeconds: 3 });
    const outcomes = await drive(CRITICAL_KEY, 15, 7_000);
    simulator.setFaults({});
    const upstream429 = outcomes.find((o) => o.status === 429);
    if (!upstream429) throw new Error('the provider 429 never reached a caller');
    const pause = outcomes.filter((o) => o.at > upstream429.at + 200 && o.at < upstream429.at + 2_800);
    const after = outcomes.filter((o) => o.at > upstream429.at + 4_500);
    console.log(
      `pause: ${pause.length} answers in the 3 s after the 429 (${pause.filter((o) => o.status === 503).length} 503), ${
        after.filter((o) => o.status === 200).length
      }/${after.length} 200 after it`,
    );
    expect(upstream429.retryAfter).toBe('3');
    expect(pause.length).toBeGreaterThan(10);
    expect(pause.every((o) => o.status === 503 && o.reason === 'UPSTREAM_RATE_LIMITED')).toBe(true);
    expect(pause.every((o) => Number(o.retryAfter) >= 1 && Number(o.retryAfter) <= 3)).toBe(true);
    expect(after.length).toBeGreaterThan(10);
    expect(after.every((o) => o.status === 200)).toBe(true);
  });

  test(`a day quota of ${QUOTA} over three replicas: ${QUOTA}-${QUOTA + 3} provider calls, then 429 QUOTA_EXCEEDED; the cache still serves`, async () => {
    const calls = () => simulator.stats().accounts[MERCHANTS.metered[0]]?.calls ?? 0;
    // One known plan, read once (billable) and kept in the answer cache.
    expect(
      (await send(gateways[0] as GatewayProcess, METERED_KEY, `/api/subscriptions/plan/${PLAN}`, false))
        .status,
    ).toBe(200);
    const outcomes: Outcome[] = [];
    for (let batch = 0; batch < 30; batch++)
      outcomes.push(
        ...(await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            // Unknown plans: 404, billable, never cached.
            send(
              gateways[(batch + i) % 3] as GatewayProcess,
              METERED_KEY,
              `/api/subscriptions/plan/${randomUUID()}`,
              false,
            ),
          ),
        )),
      );
    const refused = outcomes.filter((o) => o.status === 429);
    const midnight = periodAt('day', Date.now(), TIME_ZONE).endsAt;
    console.log(`quota ${QUOTA}: provider calls ${calls()}, refused ${refused.length} of ${outcomes.length}`);
    expect(calls()).toBeGreaterThanOrEqual(QUOTA);
    expect(calls()).toBeLessThanOrEqual(QUOTA + 3);
    expect(outcomes.filter((o) => o.status !== 404 && o.status !== 429)).toEqual([]);
    expect(refused.every((o) => o.reason === 'QUOTA_EXCEEDED')).toBe(true);
    for (const o of refused)
      expect(Math.abs(Number(o.retryAfter) - (midnight - o.at) / 1000)).toBeLessThan(3);
    const cached = await Promise.all(
      gateways.map((g) => send(g, METERED_KEY, `/api/subscriptions/plan/${PLAN}`, false)),
    );
    expect(cached.map((o) => o.status)).toEqual([200, 200, 200]);
    expect(calls()).toBeLessThanOrEqual(QUOTA + 3);

    // A graceful stop writes every replica's ledger: its billable count equals the provider's count exactly.
    const billedByProvider = calls();
    await Promise.all(gateways.map((g) => g.stop()));
    const client = new Redis(redis.url);
    try {
      const today = new Date().toISOString().slice(0, 10);
      const report = await readUsage(usageLedgerStore(client as unknown as RedisClient, PREFIX), {
        from: today,
        to: today,
      });
      const metered = report.totals.find((t) => t.client === 'metered' && t.account === 'metered');
      console.log(`ledger: ${JSON.stringify(report.totals)}`);
      expect(metered?.counts.billable).toBe(billedByProvider);
      expect(metered?.counts.cacheHits).toBe(3);
      expect(metered?.counts['refused:QUOTA_EXCEEDED']).toBe(refused.length);
    } finally {
      client.disconnect();
    }
    // `npm run usage` (its entry point, against the same Redis and prefix) shows the same counts.
    const cli = await runToExit('src/usage/usage-cli.ts', { ...env, NODE_ENV: 'test' }, [
      '--client',
      'metered',
      '--format',
      'json',
    ]);
    expect(cli.code).toBe(0);
    const printed = JSON.parse(cli.output) as { totals: { counts: Record<string, number> }[] };
    expect(printed.totals[0]?.counts.billable).toBe(billedByProvider);
    expect(printed.totals[0]?.counts['refused:QUOTA_EXCEEDED']).toBe(refused.length);
  });
});
