// The provider budget on a fake clock: the fleet's rate held, priorities cut in order, pauses, AIMD, Redis down.
import { createMemoryBudgetStore } from '../../../src/budget/internal/memory-budget-store';
import { GRANTED } from '../../../src/budget/internal/provider-budget';
import type { Priority } from '../../../src/config/budget-schema';
import { budgetOf, FakeClock, failingStore, replica, Tally } from './budget-fakes';

const TICK = 10;

/** Runs `seconds` of load: each tick, each replica asks for its calls per second / 100 (fractions carried). */
async function load(
  clock: FakeClock,
  tally: Tally,
  plan: { budget: import('../../../src/budget').ProviderBudget; priority: Priority; perSecond: number }[],
  seconds: number,
  onGranted?: (second: number) => void,
): Promise<void> {
  const carry = plan.map(() => 0);
  for (let t = 0; t < (seconds * 1000) / TICK; t += 1) {
    plan.forEach((p, i) => {
      carry[i] += (p.perSecond * TICK) / 1000;
      while (carry[i] >= 1) {
        carry[i] -= 1;
        tally.ask(p.budget, p.priority, onGranted);
      }
    });
    await clock.advance(TICK);
  }
  await tally.done();
}

describe('provider budget', () => {
  test('room in the local buckets is granted synchronously, with the one shared grant object', async () => {
    const clock = new FakeClock();
    const a = replica(createMemoryBudgetStore(), clock, budgetOf(100));
    await clock.advance(1_000); // the first exchange has given this replica its part, the bucket has filled
    const admission = a.budget.admit('standard');
    expect(admission).toBe(GRANTED);
    await a.budget.close();
  });

  test('grants are counted in upstream_budget_decisions_total by priority whenever it is read, and at close', async () => {
    const clock = new FakeClock();
    const a = replica(createMemoryBudgetStore(), clock, undefined); // unbounded: every call granted
    const grantedOf = async (priority: Priority) =>
      (await a.metrics.budget.decisions.get()).values.find(
        (v) => v.labels.priority === priority && v.labels.decision === 'granted',
      )?.value;
    for (let i = 0; i < 3; i++) a.budget.admit('standard');
    a.budget.admit('critical');
    expect(await grantedOf('standard')).toBe(3);
    expect(await grantedOf('critical')).toBe(1);
    a.budget.admit('standard');
    expect(await grantedOf('standard')).toBe(4); // read twice: counted once
    a.budget.admit('sheddable');
    await a.budget.close();
    expect(await grantedOf('sheddable')).toBe(1);
    // A retired account's last retries are admitted after close, when nothing flushes any more: counted at once.
    a.budget.admit('sheddable');
    expect(await grantedOf('sheddable')).toBe(2);
  });

  // A removed account's budget left its gauges behind: removed while paused, upstream_budget_paused stayed 1 for
  // good and the pause alert (max by account == 1) fired for an account that no longer exists.
  test('a closed budget removes its gauges; a replaced one (its successor exports the account) neither writes nor removes them', async () => {
    const clock = new FakeClock();
    const store = createMemoryBudgetStore();
    const series = async (r: ReturnType<typeof replica>) => {
      const { budget } = r.metrics;
      const gauges = [
        budget.paused,
        budget.degraded,
        budget.effectiveRate,
        budget.replicas,
        budget.allocatedRate,
      ];
      const values = await Promise.all(gauges.map(async (g) => (await g.get()).values));
      return values.flat().filter((v) => v.labels.account === 'acme');
    };
    const removed = replica(store, clock, budgetOf(100));
    await clock.advance(1_500);
    removed.budget.observe(429, '30');
    expect(await series(removed)).not.toEqual([]);
    await removed.budget.close();
    expect(await series(removed)).toEqual([]);

    let newest = false;
    const replaced = replica(store, clock, budgetOf(100), { newest: () => newest });
    newest = true;
    await clock.advance(1_500);
    replaced.metrics.budget.paused.set({ account: 'acme' }, 0); // what the successor exports
    newest = false;
    replaced.budget.observe(429, '30');
    await clock.advance(1_100);
    expect((await replaced.metrics.budget.paused.get()).values).toEqual([
      expect.objectContaining({ labels: { account: 'acme' }, value: 0 }),
    ]);
    await replaced.budget.close();
    expect((await replaced.metrics.budget.paused.get()).values).toHaveLength(1);
  });

  // A retired account's call that ends after its budget closed (its drain ran out) still brings the provider's
  // answer: the closed budget came back into the fleet record with it (its hold counted for a whole lease, the
  // others granted less) and exported its gauges again (a removed account "paused" for good: the alert fires).
  test.each([
    ['a 429 with Retry-After', '30'],
    ['a 429 without Retry-After', undefined],
  ])(
    'a closed budget that hears %s tells the fleet, but neither comes back into its record nor exports gauges again',
    async (_what, retryAfter) => {
      const clock = new FakeClock();
      const store = createMemoryBudgetStore();
      const other = replica(store, clock, budgetOf(100), { replicaId: 'other' });
      const closing = replica(store, clock, budgetOf(100), { replicaId: 'closing' });
      await clock.advance(1_500);
      expect(closing.budget.snapshot().replicas).toBe(2);
      await closing.budget.close();
      closing.budget.observe(429, retryAfter);
      await clock.advance(10);
      // A replica starting now reads the fleet record at its first exchange: `other` and itself are live.
      const reader = replica(store, clock, budgetOf(100), { replicaId: 'reader' });
      await clock.advance(10);
      const fleet = reader.budget.snapshot();
      expect(fleet.replicas).toBe(2);
      // The provider's answer still reached the fleet.
      if (retryAfter) expect(fleet.pausedUntil).toBeGreaterThan(clock.now());
      else expect(fleet.learnedRate).toBeLessThan(100);
      const { budget } = closing.metrics;
      for (const gauge of [budget.paused, budget.effectiveRate, budget.replicas, budget.allocatedRate])
        expect((await gauge.get()).values.filter((v) => v.labels.account === 'acme')).toEqual([]);
      // Nothing refilled for the closed unit: it grants no more than what it held at close.
      let granted = 0;
      while (closing.budget.admit('critical') === GRANTED && granted < 1_000) granted += 1;
      await clock.advance(5_000);
      expect(closing.budget.admit('critical')).not.toBe(GRANTED);
      for (const r of [other, reader]) await r.budget.close();
    },
  );

  test('three replicas at 4x the budget, spread unevenly: each second after the first stays within budget + 5 %, critical is served', async () => {
    const clock = new FakeClock();
    const store = createMemoryBudgetStore();
    const settings = budgetOf(50);
    const [a, b, c] = [1, 2, 3].map((n) => replica(store, clock, settings, { replicaId: `r${n}` }));
    const tally = new Tally(clock);
    const origin = clock.now();
    await load(
      clock,
      tally,
      [
        { budget: a.budget, priority: 'sheddable', perSecond: 120 },
        { budget: b.budget, priority: 'sheddable', perSecond: 40 },
        { budget: b.budget, priority: 'critical', perSecond: 15 },
        { budget: c.budget, priority: 'critical', perSecond: 25 },
      ],
      12,
    );
    const perSecond = tally.seconds(origin, 2, 12);
    for (const granted of perSecond) expect(granted).toBeLessThanOrEqual(50 * 1.05);
    expect(perSecond.reduce((x, y) => x + y, 0) / perSecond.length).toBeGreaterThan(40);
    expect(tally.granted.critical / tally.asked.critical).toBeGreaterThanOrEqual(0.95);
    expect(tally.refusals.every((r) => !r.granted && r.reason === 'UPSTREAM_BUDGET_EXHAUSTED')).toBe(true);
    for (const r of [a, b, c]) await r.budget.close();
  });

  test('sheddable alone never gets more than its share; standard gets its 80 %', async () => {
    const clock = new FakeClock();
    const store = createMemoryBudgetStore();
    const a = replica(store, clock, budgetOf(40), { replicaId: 'a' });
    const shed = new Tally(clock);
    const origin = clock.now();
    await load(clock, shed, [{ budget: a.budget, priority: 'sheddable', perSecond: 200 }], 8);
    for (const granted of shed.seconds(origin, 3, 8)) expect(granted).toBeLessThanOrEqual(20 * 1.1);
    const standard = new Tally(clock);
    const origin2 = clock.now();
    await load(clock, standard, [{ budget: a.budget, priority: 'standard', perSecond: 200 }], 8);
    const perSecond = standard.seconds(origin2, 3, 8);
    for (const granted of perSecond) expect(granted).toBeLessThanOrEqual(32 * 1.1);
    expect(Math.min(...perSecond)).toBeGreaterThanOrEqual(32 * 0.8);
    await a.budget.close();
  });

  test('a 429 with Retry-After: 3 pauses every replica; callers get the time left; one probe fleet-wide ends it', async () => {
    const clock = new FakeClock();
    const store = createMemoryBudgetStore();
    const replicas = [1, 2, 3].map((n) => replica(store, clock, budgetOf(100), { replicaId: `r${n}` }));
    await clock.advance(1_500);
    replicas[0].budget.observe(429, '3');
    await clock.advance(10); // the signal reaches the others
    for (const r of replicas) {
      const refused = r.budget.admit('critical');
      expect(refused).toEqual({ granted: false, reason: 'UPSTREAM_RATE_LIMITED', retryAfterSeconds: 3 });
    }
    // For 3 s, nothing goes; then exactly one call of the fleet (the probe) until its answer comes back.
    const tally = new Tally(clock);
    const origin = clock.now();
    await load(
      clock,
      tally,
      replicas.map((r) => ({ budget: r.budget, priority: 'critical' as Priority, perSecond: 30 })),
      4,
    );
    const sent = tally.seconds(origin, 0, 4).reduce((x, y) => x + y, 0);
    expect(sent).toBe(1);
    expect(tally.refusals.every((r) => !r.granted && r.reason === 'UPSTREAM_RATE_LIMITED')).toBe(true);
    const prober = replicas.find((r) => r.budget.snapshot().probing);
    expect(prober).toBeDefined();
    prober?.budget.observe(200);
    await clock.advance(1_100);
    for (const r of replicas) expect(r.budget.snapshot().pausedUntil).toBeUndefined();
    expect(replicas[1].metrics.budget.pauses.get()).toBeDefined();
    for (const r of replicas) await r.budget.close();
  });

  // The Redis store answers the pause's end moved between Redis's clock and the replica's by a round trip's few ms:
  // the probe claim's own reply, a few ms later than the pause known, was taken for a new pause that reset the probe
  // just won, and the fleet stayed paused for the probe's lease with no probe sent (seen in the three-replica test).
  test("a pause's end that comes back a few ms later (the clocks' jitter) is the same pause: the won probe is sent", async () => {
    const clock = new FakeClock();
    const inner = createMemoryBudgetStore();
    let exchanges = 0;
    const jittery: typeof inner = {
      ...inner,
      exchange: async (request) => {
        const reply = await inner.exchange(request);
        exchanges += 1; // each round trip a little different: each reply a ms later than the one before
        return reply.pausedUntil > 0 ? { ...reply, pausedUntil: reply.pausedUntil + exchanges } : reply;
      },
    };
    const a = replica(jittery, clock, budgetOf(100), { replicaId: 'a' });
    await clock.advance(1_500);
    a.budget.observe(429, '2');
    await clock.advance(2_100);
    const probe = await a.budget.admit('critical');
    expect(probe).toBe(GRANTED);
    expect(a.budget.snapshot().probing).toBe(true);
    a.budget.observe(200);
    expect(a.budget.snapshot().pausedUntil).toBeUndefined();
    await a.budget.close();
  });

  // After a pause a replica held the rates of the pause until its next interval (up to 1 s near the limit, 5 s far
  // from it): its callers got 429 UPSTREAM_BUDGET_EXHAUSTED with the fleet under its rate.
  test('a replica told the pause is over asks the fleet for its part at once', async () => {
    const clock = new FakeClock();
    const inner = createMemoryBudgetStore();
    const exchangedBy: string[] = [];
    const counting: typeof inner = {
      ...inner,
      exchange: (request) => {
        exchangedBy.push(request.replicaId);
        return inner.exchange(request);
      },
    };
    const [a, b] = ['a', 'b'].map((id) => replica(counting, clock, budgetOf(100), { replicaId: id }));
    await clock.advance(1_500);
    a?.budget.observe(429, '2');
    await clock.advance(2_100);
    // a probes (its own pause), and its 200 ends the pause for the fleet.
    expect(await a?.budget.admit('critical')).toBe(GRANTED);
    a?.budget.observe(200);
    exchangedBy.length = 0;
    await clock.advance(200);
    expect(b?.budget.snapshot().pausedUntil).toBeUndefined();
    expect(exchangedBy).toContain('b');
    for (const r of [a, b]) await r?.budget.close();
  });

  // The probe's 429 without Retry-After left the probe "in flight" until its lease ran out (the account's timeout
  // + 1 s): every caller of the fleet got 503 for that long, a pause the provider never asked for.
  test('a probe answered 429 without Retry-After ends the pause: the rate is lowered (AIMD), no pause is invented', async () => {
    const clock = new FakeClock();
    const store = createMemoryBudgetStore();
    const replicas = [1, 2].map((n) => replica(store, clock, budgetOf(100), { replicaId: `r${n}` }));
    await clock.advance(1_500);
    replicas[0].budget.observe(429, '2');
    await clock.advance(2_000);
    let prober: (typeof replicas)[number] | undefined;
    for (let i = 0; i < 20 && !prober; i += 1) {
      for (const r of replicas) {
        const answer = await r.budget.admit('critical');
        if (answer.granted) prober = r;
      }
      await clock.advance(10);
    }
    expect(prober).toBeDefined();
    prober?.budget.observe(429);
    await clock.advance(100);
    // Well within the probe lease (5 s here): calls go again, at the lowered rate, on every replica.
    const tally = new Tally(clock);
    await load(
      clock,
      tally,
      replicas.map((r) => ({ budget: r.budget, priority: 'critical' as Priority, perSecond: 20 })),
      2,
    );
    for (const r of replicas) expect(r.budget.snapshot().pausedUntil).toBeUndefined();
    expect(replicas[0].budget.snapshot().learnedRate).toBeLessThan(100);
    expect(tally.granted.critical).toBeGreaterThan(40);
    expect(tally.refusals.some((r) => !r.granted && r.reason === 'UPSTREAM_RATE_LIMITED')).toBe(false);
    for (const r of replicas) await r.budget.close();
  });

  test.each([
    ['garbage', 'soon'],
    ['negative', '-5'],
    ['a date already past', 'Wed, 21 Oct 2015 07:28:00 GMT'],
  ])(
    'a Retry-After that is %s is ignored and logged: the rate falls instead of pausing',
    async (_what, value) => {
      const clock = new FakeClock();
      const a = replica(createMemoryBudgetStore(), clock, budgetOf(100));
      await clock.advance(1_500);
      a.budget.observe(429, value);
      await clock.advance(10);
      expect(a.budget.snapshot().pausedUntil).toBeUndefined();
      expect(a.budget.snapshot().learnedRate).toBeDefined();
      expect(a.lines()).toContain('provider Retry-After not taken as given');
      await a.budget.close();
    },
  );

  test('a huge Retry-After is capped at UPSTREAM_RETRY_AFTER_MAX_SECONDS and logged', async () => {
    const clock = new FakeClock();
    const a = replica(createMemoryBudgetStore(), clock, budgetOf(100));
    await clock.advance(1_500);
    a.budget.observe(429, '999999');
    expect(a.budget.snapshot().pausedUntil).toBe(clock.now() + 120_000);
    expect(a.lines()).toContain('capped at 120 s');
    await a.budget.close();
  });

  test('a Retry-After as an HTTP date pauses until that date', async () => {
    const clock = new FakeClock();
    const a = replica(createMemoryBudgetStore(), clock, budgetOf(100));
    await clock.advance(1_000);
    const until = new Date(Math.ceil(clock.now() / 1000) * 1000 + 7_000);
    a.budget.observe(429, until.toUTCString());
    const refused = a.budget.admit();
    expect(refused).toMatchObject({ reason: 'UPSTREAM_RATE_LIMITED', retryAfterSeconds: 7 });
    await a.budget.close();
  });

  test('without Retry-After and without a configured budget, the fleet learns the provider limit and its 429s stop', async () => {
    const clock = new FakeClock();
    const store = createMemoryBudgetStore();
    const replicas = [1, 2].map((n) => replica(store, clock, undefined, { replicaId: `r${n}` }));
    const limit = 40;
    const seen = new Map<number, number>();
    const tooMany = new Map<number, number>();
    const provider = (r: (typeof replicas)[number]) => (second: number) => {
      const n = (seen.get(second) ?? 0) + 1;
      seen.set(second, n);
      // The answer comes back a few ms later, like a real call.
      clock.setTimeout(() => {
        if (n > limit) tooMany.set(second, (tooMany.get(second) ?? 0) + 1);
        r.budget.observe(n > limit ? 429 : 200);
      }, 5);
    };
    // The load above asks without playing the provider; now play it for real.
    const played = new Tally(clock);
    const origin2 = clock.now();
    const carry = [0, 0];
    for (let t = 0; t < 40_000 / TICK; t += 1) {
      replicas.forEach((r, i) => {
        carry[i] += (60 * TICK) / 1000;
        while (carry[i] >= 1) {
          carry[i] -= 1;
          played.ask(r.budget, 'critical', provider(r));
        }
      });
      await clock.advance(TICK);
    }
    await played.done();
    const first = Math.floor(origin2 / 1000);
    const lastTen = Array.from({ length: 10 }, (_, i) => first + 30 + i);
    for (const second of lastTen) expect(tooMany.get(second) ?? 0).toBe(0);
    // Critical callers may use the whole rate: what the provider receives is the learned rate.
    for (const second of lastTen) expect(seen.get(second) ?? 0).toBeGreaterThanOrEqual(limit * 0.8);
    const learned = replicas[0].budget.snapshot().effectiveRate ?? Number.POSITIVE_INFINITY;
    expect(learned).toBeLessThanOrEqual(limit);
    expect(learned).toBeGreaterThanOrEqual(limit * 0.8);
    expect(tooMany.size).toBeGreaterThan(0); // it did have to learn
    for (const r of replicas) await r.budget.close();
  }, 60_000);

  test('Redis down: each replica keeps to budget / replicas last seen, logs it, and rejoins when it answers', async () => {
    const clock = new FakeClock();
    const store = failingStore(createMemoryBudgetStore());
    const replicas = [1, 2, 3].map((n) => replica(store, clock, budgetOf(30), { replicaId: `r${n}` }));
    const plan = replicas.map((r) => ({ budget: r.budget, priority: 'critical' as Priority, perSecond: 60 }));
    await load(clock, new Tally(clock), plan, 3);
    store.down = true;
    const tally = new Tally(clock);
    const origin = clock.now();
    await load(clock, tally, plan, 6);
    for (const granted of tally.seconds(origin, 2, 6)) expect(granted).toBeLessThanOrEqual(30 * 1.5);
    for (const r of replicas) {
      expect(r.budget.snapshot().degraded).toBe(true);
      expect(r.lines()).toContain('keeping to budget / replicas last seen');
    }
    store.down = false;
    const after = new Tally(clock);
    const origin2 = clock.now();
    await load(clock, after, plan, 6);
    for (const r of replicas) expect(r.budget.snapshot().degraded).toBe(false);
    const perSecond = after.seconds(origin2, 3, 6);
    for (const granted of perSecond) expect(granted).toBeLessThanOrEqual(30 * 1.05);
    expect(Math.min(...perSecond)).toBeGreaterThanOrEqual(30 * 0.8);
    for (const r of replicas) await r.budget.close();
  });

  test('a pause signal years ahead (forged or clock-skewed) is held to UPSTREAM_RETRY_AFTER_MAX_SECONDS', async () => {
    const clock = new FakeClock();
    const store = createMemoryBudgetStore();
    const a = replica(store, clock, budgetOf(100), { replicaId: 'a' });
    await clock.advance(1_000);
    await store.publish({ kind: 'pause', until: clock.now() + 10 * 365 * 86_400_000 });
    await clock.advance(10);
    const until = a.budget.snapshot().pausedUntil ?? 0;
    expect(until).toBeGreaterThan(clock.now());
    expect(until).toBeLessThanOrEqual(clock.now() + 120_000);
    await a.budget.close();
  });

  test('a wait whose caller left is cancelled: nothing taken, the next call gets the token', async () => {
    const clock = new FakeClock();
    const a = replica(createMemoryBudgetStore(), clock, budgetOf(10), { waitMs: 1_000 });
    await clock.advance(2_000);
    while (a.budget.admit('critical') === GRANTED); // empties the buckets (the last one waits)
    const waiting = [a.budget.admit('critical'), a.budget.admit('critical')];
    const [first, second] = waiting as (Promise<unknown> & { cancel?(): void })[];
    expect(first?.cancel).toBeDefined();
    first?.cancel?.();
    await clock.advance(1);
    expect(await first).toMatchObject({ granted: false });
    await clock.advance(300);
    // The cancelled call took nothing: the one behind it got the next token.
    expect(await second).toBe(GRANTED);
    await a.budget.close();
  });

  test('a granted call that never went gives its token back: the next call is granted at once', async () => {
    const clock = new FakeClock();
    const a = replica(createMemoryBudgetStore(), clock, budgetOf(10), { waitMs: 0 });
    await clock.advance(2_000);
    while (a.budget.admit('critical') === GRANTED);
    expect(a.budget.admit('critical')).toMatchObject({ granted: false });
    a.budget.giveBack('critical');
    expect(a.budget.admit('critical')).toBe(GRANTED);
    await a.budget.close();
  });
});
