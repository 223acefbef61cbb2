// Provider budgets of several replicas sharing a real redis-server: the fleet's rate, priorities, the pause and its
// one probe, Redis killed mid-run, the Lua script equal to the memory store, and the Redis commands it costs.

import { Redis } from 'ioredis';
import {
  type BudgetStore,
  createMemoryBudgetStore,
  createRedisBudgetStore,
  type ProviderBudget,
} from '../../../src/budget';
import type { ExchangeRequest } from '../../../src/budget/internal/fleet-state';
import type { Priority } from '../../../src/config/budget-schema';
import { budgetKeys } from '../../../src/keys/redis-keys';
import { systemClock } from '../../../src/tokens';
import { budgetReplica } from '../../support/budget-replicas';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

describe('provider budget fleet on a real Redis', () => {
  let server: RedisServer;
  let admin: Redis;
  const closers: (() => Promise<void> | void)[] = [];

  async function replica(accountId: string, requestsPerSecond: number | undefined): Promise<ProviderBudget> {
    return (await replicaWithHealth(accountId, requestsPerSecond)).budget;
  }

  async function replicaWithHealth(accountId: string, requestsPerSecond: number | undefined) {
    const made = await budgetReplica(server.url, accountId, requestsPerSecond);
    closers.push(() => made.close());
    return made;
  }

  /** The most of the driver's own time one step counts: three 10 ms steps, a late timer's usual slack. */
  const MAX_STEP_MS = 30;

  /**
   * Asks at `perSecond` for `ms`, in 10 ms steps; returns grants per wall-clock second and per priority, and the
   * longest the driver itself was held up between two steps.
   */
  async function drive(
    plan: { budget: ProviderBudget; priority: Priority; perSecond: number }[],
    ms: number,
    onGranted?: () => void,
  ) {
    const perSecond = new Map<number, number>();
    const asked: Record<Priority, number> = { sheddable: 0, standard: 0, critical: 0 };
    const granted: Record<Priority, number> = { sheddable: 0, standard: 0, critical: 0 };
    const reasons = new Set<string>();
    const criticalRefusedAt: number[] = [];
    const pending: Promise<void>[] = [];
    const start = Date.now();
    const carry = plan.map(() => 0);
    let last = start;
    let longestStallMs = 0;
    while (Date.now() - start < ms) {
      const now = Date.now();
      // Callers arriving at a rate: when this loop itself is held up (a busy machine delays the 10 ms timer by
      // hundreds of ms), it resumes at the rate instead of sending the missed calls in one burst that no rate
      // limiter would let through (CI's red run: 15 critical asks in one millisecond after a stall).
      const elapsedMs = Math.min(now - last, MAX_STEP_MS);
      longestStallMs = Math.max(longestStallMs, now - last);
      plan.forEach((p, i) => {
        carry[i] += (p.perSecond * elapsedMs) / 1000;
        while (carry[i] >= 1) {
          carry[i] -= 1;
          asked[p.priority] += 1;
          const record = (a: Awaited<ReturnType<ProviderBudget['admit']>>) => {
            if (!a.granted) {
              reasons.add(a.reason);
              if (p.priority === 'critical') criticalRefusedAt.push(Date.now() - start);
              return;
            }
            const second = Math.floor(Date.now() / 1000);
            perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
            granted[p.priority] += 1;
            onGranted?.();
          };
          const result = p.budget.admit(p.priority);
          if (result instanceof Promise) pending.push(result.then(record));
          else record(result);
        }
      });
      last = now;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await Promise.all(pending);
    const firstSecond = Math.floor(start / 1000);
    /** Whole seconds from `from` s after the start, the last (partial) one left out. */
    const seconds = (from: number) => {
      const out: number[] = [];
      for (let s = firstSecond + from; s < Math.floor((start + ms) / 1000); s += 1)
        out.push(perSecond.get(s) ?? 0);
      return out;
    };
    return { seconds, asked, granted, reasons, criticalRefusedAt, longestStallMs };
  }

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
  });
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });
  afterAll(async () => {
    admin.disconnect();
    await server.stop();
  });

  // Issue 29's bound, exactly: every whole second after the first within budget + 5 % (the default burst, a twentieth
  // of a second of budget, is that 5 %), critical >= 95 % over the whole run, cold start included.
  test('three replicas at 4x the budget, unevenly spread: every second after the first within budget + 5 %, critical >= 95 % over the run', async () => {
    const [a, b, c] = await Promise.all([1, 2, 3].map(() => replica('four-times', 60)));
    const run = await drive(
      [
        { budget: a, priority: 'sheddable', perSecond: 150 },
        { budget: b, priority: 'sheddable', perSecond: 40 },
        { budget: b, priority: 'critical', perSecond: 15 },
        { budget: c, priority: 'critical', perSecond: 35 },
      ],
      8_000,
    );
    const seconds = run.seconds(1);
    const critical = run.granted.critical / run.asked.critical;
    console.log(
      `fleet 4x: per second ${JSON.stringify(seconds)} (first partial ${run.seconds(0)[0]}); critical ${(critical * 100).toFixed(1)} % of ${run.asked.critical}; sheddable ${run.granted.sheddable}/${run.asked.sheddable}; critical refused at ms ${run.criticalRefusedAt}; longest driver stall ${run.longestStallMs} ms`,
    );
    for (const granted of seconds) expect(granted).toBeLessThanOrEqual(60 * 1.05);
    expect(critical).toBeGreaterThanOrEqual(0.95);
    expect(run.granted.sheddable).toBeGreaterThan(0);
    expect([...run.reasons]).toEqual(['UPSTREAM_BUDGET_EXHAUSTED']);
  }, 30_000);

  test('a 429 with Retry-After: 3 pauses the fleet: at most one call (the probe) in the next 3 s, then calls resume', async () => {
    const replicas = await Promise.all([1, 2, 3].map(() => replica('paused', 100)));
    await drive(
      replicas.map((budget) => ({ budget, priority: 'standard' as Priority, perSecond: 20 })),
      1_500,
    );
    replicas[1].observe(429, '3');
    const paused = await drive(
      replicas.map((budget) => ({ budget, priority: 'critical' as Priority, perSecond: 30 })),
      3_000,
    );
    const sent = paused.granted.critical;
    expect(sent).toBeLessThanOrEqual(1);
    expect([...paused.reasons]).toEqual(['UPSTREAM_RATE_LIMITED']);
    // The probe goes when the pause ends; its answer resumes every replica.
    let probes = 0;
    const after = await drive(
      replicas.map((budget) => ({ budget, priority: 'critical' as Priority, perSecond: 30 })),
      2_000,
      () => {
        probes += 1;
        if (probes === 1) for (const r of replicas) r.observe(200);
      },
    );
    expect(after.granted.critical).toBeGreaterThan(20);
  }, 30_000);

  test('Redis killed mid-run: the fleet stays within budget x 1.5, and shares the budget again when Redis is back', async () => {
    const replicas = await Promise.all([1, 2, 3].map(() => replica('killed', 60)));
    const plan = replicas.map((budget, i) => ({
      budget,
      priority: 'standard' as Priority,
      perSecond: 40 + 20 * i,
    }));
    await drive(plan, 2_000);
    await server.kill();
    const down = await drive(plan, 4_000);
    for (const granted of down.seconds(1)) expect(granted).toBeLessThanOrEqual(60 * 1.5);
    expect(replicas.every((r) => r.snapshot().degraded)).toBe(true);
    await server.restart();
    await drive(plan, 3_000); // reconnect and rejoin
    expect(replicas.every((r) => !r.snapshot().degraded)).toBe(true);
    const back = await drive(plan, 4_000);
    for (const granted of back.seconds(1)) expect(granted).toBeLessThanOrEqual(60 * 1.05);
    // Standard callers may use 80 % of the budget: 48 a second.
    expect(Math.min(...back.seconds(1))).toBeGreaterThanOrEqual(48 * 0.7);
  }, 40_000);

  test('the Lua exchange answers as the memory store does, step for step', async () => {
    const client = new Redis(server.url);
    closers.push(() => client.disconnect());
    const keys = budgetKeys('budget-test:', 'equal');
    const channels = { publish: async () => undefined, subscribe: () => () => undefined };
    const stores: BudgetStore[] = [
      createMemoryBudgetStore(),
      createRedisBudgetStore({
        redis: client,
        key: keys.fleet,
        channel: keys.channel,
        channels,
        time: 'caller',
      }),
    ];
    const t0 = 1_800_000_000_000;
    const shares = { sheddable: 0.5, standard: 0.8, critical: 1 };
    const none = { sheddable: 0, standard: 0, critical: 0 };
    const base = { using: none, maxPauseMs: 120_000 };
    const steps: ExchangeRequest[] = [
      {
        ...base,
        replicaId: 'a',
        now: t0,
        configuredRate: 100,
        shares,
        demand: { sheddable: 300, standard: 0, critical: 0 },
        accepted: 0,
        event: { kind: 'none' },
      },
      {
        ...base,
        replicaId: 'b',
        now: t0 + 10,
        configuredRate: 100,
        shares,
        demand: { sheddable: 0, standard: 30, critical: 40 },
        accepted: 0,
        event: { kind: 'none' },
      },
      {
        ...base,
        replicaId: 'a',
        now: t0 + 1_000,
        configuredRate: 100,
        shares,
        demand: { sheddable: 280, standard: 0, critical: 5 },
        accepted: 50,
        event: { kind: 'decrease' },
      },
      {
        ...base,
        replicaId: 'b',
        now: t0 + 1_500,
        configuredRate: 100,
        shares,
        demand: { sheddable: 0, standard: 30, critical: 40 },
        accepted: 40,
        event: { kind: 'pause', until: t0 + 4_000 },
      },
      {
        ...base,
        replicaId: 'c',
        now: t0 + 4_100,
        configuredRate: 100,
        shares,
        demand: { sheddable: 1, standard: 1, critical: 1 },
        accepted: 0,
        event: { kind: 'probe', leaseMs: 5_000 },
      },
      {
        ...base,
        replicaId: 'a',
        now: t0 + 4_200,
        configuredRate: 100,
        shares,
        demand: { sheddable: 1, standard: 1, critical: 1 },
        accepted: 0,
        event: { kind: 'probe', leaseMs: 5_000 },
      },
      {
        ...base,
        replicaId: 'c',
        now: t0 + 4_300,
        configuredRate: 100,
        shares,
        demand: { sheddable: 1, standard: 1, critical: 1 },
        accepted: 1,
        event: { kind: 'resume' },
      },
      {
        ...base,
        replicaId: 'b',
        now: t0 + 9_000,
        configuredRate: 100,
        shares,
        demand: { sheddable: 0, standard: 10, critical: 10 },
        accepted: 20,
        event: { kind: 'none' },
      },
      {
        ...base,
        replicaId: 'd',
        now: t0 + 30_000,
        configuredRate: undefined,
        shares,
        demand: { sheddable: 0, standard: 10, critical: 10 },
        accepted: 20,
        event: { kind: 'none' },
      },
      // Holds: "a" still applies what it had; "b" then gets only what "a" does not hold; "a" reports the lower figure.
      {
        ...base,
        replicaId: 'a',
        now: t0 + 30_100,
        configuredRate: 100,
        shares,
        demand: { sheddable: 200, standard: 0, critical: 0 },
        accepted: 50,
        using: { sheddable: 50, standard: 10, critical: 10 },
        event: { kind: 'none' },
      },
      {
        ...base,
        replicaId: 'b',
        now: t0 + 30_200,
        configuredRate: 100,
        shares,
        demand: { sheddable: 0, standard: 10, critical: 80 },
        accepted: 30,
        event: { kind: 'none' },
      },
      {
        ...base,
        replicaId: 'a',
        now: t0 + 30_300,
        configuredRate: 100,
        shares,
        demand: { sheddable: 200, standard: 0, critical: 0 },
        accepted: 50,
        using: { sheddable: 10, standard: 0, critical: 0 },
        event: { kind: 'none' },
      },
      {
        ...base,
        replicaId: 'b',
        now: t0 + 30_400,
        configuredRate: 100,
        shares,
        demand: { sheddable: 0, standard: 10, critical: 80 },
        accepted: 30,
        using: { sheddable: 0, standard: 5, critical: 30 },
        event: { kind: 'none' },
      },
      // A pause asked for far beyond the cap is held to now + the cap.
      {
        ...base,
        replicaId: 'b',
        now: t0 + 31_000,
        configuredRate: 100,
        shares,
        demand: { sheddable: 0, standard: 10, critical: 80 },
        accepted: 30,
        event: { kind: 'pause', until: t0 + 10_000_000 },
      },
      // A settled 429 ("b" drew most of the fleet's accepted calls): the ceiling is the reports summed, which caps
      // the rate's climb a minute later (the fleet is still paused then: the learned rate moves all the same).
      ...[
        { replicaId: 'a', now: t0 + 40_000, accepted: 9, event: { kind: 'none' } as const },
        { replicaId: 'b', now: t0 + 40_500, accepted: 20, event: { kind: 'decrease' } as const },
        { replicaId: 'a', now: t0 + 70_000, accepted: 9, event: { kind: 'none' } as const },
        { replicaId: 'b', now: t0 + 100_000, accepted: 17, event: { kind: 'none' } as const },
        // A reading far under the allowed rate ("b" gone): the decrease stops at READING_FLOOR of it, and it sets no
        // ceiling (the rate climbs on).
        { replicaId: 'a', now: t0 + 200_000, accepted: 1, event: { kind: 'decrease' } as const },
        { replicaId: 'a', now: t0 + 260_000, accepted: 20, event: { kind: 'none' } as const },
      ].map((step) => ({ ...base, ...step, configuredRate: 30, shares, demand: { ...none, critical: 60 } })),
    ];
    const round = (reply: Awaited<ReturnType<BudgetStore['exchange']>>) =>
      JSON.parse(JSON.stringify(reply, (_k, v) => (typeof v === 'number' ? Math.round(v * 1e6) / 1e6 : v)));
    for (const step of steps) {
      const [memory, redis] = await Promise.all(stores.map((s) => s.exchange(step)));
      expect(round(redis)).toEqual(round(memory));
    }
  });

  test('a forged record: a pause years ahead is held to UPSTREAM_RETRY_AFTER_MAX_SECONDS, NaN and Infinity read as absent', async () => {
    const key = budgetKeys('budget-test:', 'forged').fleet;
    const now = Date.now();
    await admin.hset(key, {
      '@pause': String(now + 10 * 365 * 86_400_000),
      '@learned': 'nan',
      '@ceiling': 'inf',
      '@raisedAt': '-inf',
      '@lastDecrease': 'garbage',
    });
    const client = new Redis(server.url);
    closers.push(() => client.disconnect());
    const channels = { publish: async () => undefined, subscribe: () => () => undefined };
    const store = createRedisBudgetStore({ redis: client, key, channel: 'forged', channels });
    const none = { sheddable: 0, standard: 0, critical: 0 };
    const reply = await store.exchange({
      replicaId: 'x',
      now,
      configuredRate: 60,
      shares: { sheddable: 0.5, standard: 0.8, critical: 1 },
      demand: { sheddable: 0, standard: 10, critical: 0 },
      accepted: 0,
      using: none,
      maxPauseMs: 120_000,
      event: { kind: 'none' },
    });
    expect(reply.pausedUntil).toBeLessThanOrEqual(now + 120_000);
    expect(reply.effectiveRate).toBe(60);
    expect(reply.learnedRate).toBeUndefined();
    expect(reply.repaired).toBe(4);
    for (const value of Object.values(reply.allocation ?? {})) expect(Number.isFinite(value)).toBe(true);
    // What the script wrote back is readable: the pause capped (the record keeps Redis's clock, this host's), no NaN
    // left in the record.
    const record = await admin.hgetall(key);
    expect(Number(record['@pause'])).toBeLessThanOrEqual(Date.now() + 120_000);
    expect(Object.values(record).some((v) => /nan|inf/i.test(v))).toBe(false);
    // A replica reading the record pauses at most for the cap.
    const budget = await replica('forged', 60);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(budget.snapshot().pausedUntil ?? 0).toBeLessThanOrEqual(Date.now() + 120_000);
    expect(budget.snapshot().effectiveRate).toBe(60);
  });

  test('a budget key of the wrong type degrades that budget only: Redis stays healthy, the replica keeps to its share', async () => {
    await admin.set(budgetKeys('budget-test:', 'wrongtype').fleet, 'not a hash');
    const { budget, health } = await replicaWithHealth('wrongtype', 60);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(budget.snapshot().degraded).toBe(true);
    expect(health.healthy()).toBe(true);
    // Its share of the budget (alone: the whole of it), not unbounded.
    expect(budget.snapshot().allocation).toBeDefined();
  });

  // Each replica passed its own clock into the script: a host 10 s behind wrote leases the others read as expired, so
  // they dropped its record (its demand and its hold) and took the budget for themselves: its critical callers got
  // 26 % of their calls.
  test('a replica whose clock is 10 s behind: the fleet still keeps to the budget and its critical callers keep their share', async () => {
    const behind = { ...systemClock, now: () => Date.now() - 10_000 };
    const made = await budgetReplica(server.url, 'skewed', 60, 200, undefined, behind);
    closers.push(() => made.close());
    const skewed = made.budget;
    const honest = await replica('skewed', 60);
    // The skewed replica's critical callers alone first: it holds most of the budget.
    await drive([{ budget: skewed, priority: 'critical', perSecond: 50 }], 2_500);
    const run = await drive(
      [
        { budget: skewed, priority: 'critical', perSecond: 50 },
        { budget: honest, priority: 'standard', perSecond: 200 },
      ],
      4_000,
    );
    const seconds = run.seconds(0);
    const critical = run.granted.critical / run.asked.critical;
    console.log(
      `clock skew: per second ${JSON.stringify(seconds)}; critical ${(critical * 100).toFixed(1)} %`,
    );
    for (const granted of seconds) expect(granted).toBeLessThanOrEqual(60 * 1.05);
    expect(critical).toBeGreaterThanOrEqual(0.9);
  }, 30_000);

  test('Redis economy: one replica at ~3,000 calls/s under a budget that does not bind costs well under 1 command per 1,000 calls', async () => {
    const budget = await replica('economy', 100_000);
    await drive([{ budget, priority: 'standard', perSecond: 3_000 }], 2_000); // past the first exchanges
    await admin.config('RESETSTAT');
    const run = await drive([{ budget, priority: 'standard', perSecond: 3_000 }], 15_000);
    const stats = await admin.info('commandstats');
    const commands = [...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)]
      .filter(([, name]) => !['info', 'config'].includes(name))
      .reduce((sum, [, , calls]) => sum + Number(calls), 0);
    const calls = run.granted.standard;
    const perThousand = (commands * 1000) / calls;
    // Reported by the helper's run; the gateway's own budget is 15 per 1,000 with everything on.
    console.log(
      `budget economy: ${commands} Redis commands for ${calls} calls = ${perThousand.toFixed(3)} per 1,000`,
    );
    expect(calls).toBeGreaterThan(30_000);
    expect(perThousand).toBeLessThan(0.5);
  }, 40_000);
});
