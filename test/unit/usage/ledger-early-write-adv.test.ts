// Adversarial review of the ledger's early writes (bfdfc94): the promise is that a replica killed without its final
// write leaves at most `bound` counted calls unwritten (provider's count <= ledger + bound), at any moment.
import { type LedgerStore, memoryLedgerStore } from '../../../src/usage/internal/ledger-store';
import { UsageLedger } from '../../../src/usage/internal/usage-ledger';
import { readUsage } from '../../../src/usage/internal/usage-report';
import { ledgerOn } from '../../support/usage-ledgers';

const tick = () => new Promise(setImmediate);

/**
 * A store with a round trip: a command reaches Redis (is applied) half a round trip after it is sent and answers a
 * round trip after; a kill between the two leaves it applied, a kill before leaves the store as it was.
 */
function latentStore(clock: { now: number }, rttMs: number, fails: (day: string) => boolean = () => false) {
  const inner = memoryLedgerStore();
  interface Op {
    applyAt: number;
    answerAt: number;
    run: () => Promise<unknown>;
    applied?: Promise<unknown>;
    fail: boolean;
    done: boolean;
    resolve: (value: unknown) => void;
    reject: (error: unknown) => void;
  }
  const ops: Op[] = [];
  const writes: string[] = [];
  const send = <T>(run: () => Promise<T>, fail = false) =>
    new Promise<T>((resolve, reject) => {
      ops.push({
        applyAt: clock.now + rttMs / 2,
        answerAt: clock.now + rttMs,
        run,
        fail,
        done: false,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
    });
  const store: LedgerStore = {
    write: (day, replica, snapshot, expireAt) => {
      writes.push(day);
      return send(() => inner.write(day, replica, snapshot, expireAt), fails(day));
    },
    read: (day) => inner.read(day),
    noteSince: (at) => send(() => inner.noteSince(at)),
    noteReset: (at, day, expireAt) => send(() => inner.noteReset(at, day, expireAt)),
    readMarker: () => inner.readMarker(),
  };
  const pump = () => {
    for (const op of ops) {
      if (op.done) continue;
      if (!op.fail && !op.applied && clock.now >= op.applyAt) op.applied = op.run();
      if (clock.now >= op.answerAt) {
        op.done = true;
        if (op.fail) op.reject(new Error('CLUSTERDOWN The cluster is down'));
        else void op.applied?.then(op.resolve, op.reject);
      }
    }
  };
  return { store, inner, pump, writes };
}

/**
 * Drives one replica from `from` to `to` in steps of `stepMs`: the timer flushes every 1000 ms after `timerFrom`
 * (as setInterval does: not awaited), `rate(t)` says whether a request ends at t. After each step `check` may look
 * at the store (a kill at that moment).
 */
async function drive(
  ledger: UsageLedger,
  clock: { now: number },
  pump: () => void,
  opts: {
    from: number;
    to: number;
    stepMs: number;
    timerFrom: number;
    requestAt: (t: number) => boolean;
    onRecord?: () => void;
    check?: () => Promise<void>;
    /** The wall clock's error at t (a clock stepped back). */
    offset?: (t: number) => number;
  },
) {
  for (let t = opts.from; t < opts.to; t += opts.stepMs) {
    clock.now = Math.floor(t + (opts.offset?.(t) ?? 0)); // Date.now is whole milliseconds
    pump();
    await tick();
    if (t >= opts.timerFrom && (t - opts.timerFrom) % 1000 === 0) void ledger.flush();
    if (opts.requestAt(t)) {
      ledger.record('shop', 'alpha', 'getPlan', 'answers2xx');
      ledger.record('shop', 'alpha', 'getPlan', 'billable');
      opts.onRecord?.();
    }
    await tick();
    pump();
    await tick();
    await opts.check?.();
  }
}

describe('early writes, adversarially', () => {
  test('a replica started into a burst (2,000/s, Redis 2 ms away) never holds more unwritten than the bound in the store', async () => {
    const T = Date.parse('2026-11-25T10:00:00Z');
    const clock = { now: T };
    const { store, inner, pump } = latentStore(clock, 2);
    const ledger = ledgerOn(store, clock, 'young');
    let recorded = 0;
    let worst = { unwritten: 0, bound: 0, at: 0 };
    // Idle since the last timer flush (T), then its first callers 900 ms in: 2,000 requests a second.
    await drive(ledger, clock, pump, {
      from: T + 1,
      to: T + 999,
      stepMs: 0.5,
      timerFrom: T + 1000,
      requestAt: (t) => t >= T + 900,
      onRecord: () => (recorded += 1),
      check: async () => {
        if (recorded === 0) return;
        const report = await readUsage(inner, { from: '2026-11-25', to: '2026-11-25' }, clock.now + 60_000);
        // Only once the store holds its count (a kill during the first write's round trip is unseen: unavoidable).
        if (report.gaps.length === 0) return;
        const written = report.totals[0]?.counts.answers2xx ?? 0;
        const bound = report.gaps[0]?.bound ?? 0;
        if (recorded - written - bound > worst.unwritten - worst.bound)
          worst = { unwritten: recorded - written, bound, at: clock.now - T };
      },
    });
    // A kill at the worst moment: what it held unwritten (the provider's calls in flight not even counted).
    expect(worst.unwritten).toBeLessThanOrEqual(worst.bound);
  });

  test('a replica killed just after midnight leaves the new day within its bound (its first count of the day written at once)', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T23:59:57.500Z') };
    const ledger = ledgerOn(store, clock, 'night');
    const spread = async (calls: number, ms: number) => {
      const start = clock.now;
      for (let i = 0; i < calls; i += 1) {
        clock.now = start + Math.floor((i * ms) / calls);
        ledger.record('shop', 'alpha', 'getPlan', 'answers2xx');
        await tick();
      }
      clock.now = start + ms;
    };
    for (let s = 0; s < 2; s += 1) {
      await spread(100, 1000);
      await ledger.flush(); // 23:59:58.5, 23:59:59.5
    }
    await spread(90, 900); // 100/s across midnight, SIGKILL at 00:00:00.400: 40 counted on the 26th
    const report = await readUsage(store, { from: '2026-11-26', to: '2026-11-26' }, clock.now + 60_000);
    const written = report.totals[0]?.counts.answers2xx ?? 0;
    const bound = report.gaps.reduce((sum, gap) => sum + gap.bound, 0);
    expect(40 - written).toBeLessThanOrEqual(bound);
  });

  test('close() racing an early write still makes the final write (a graceful stop is no gap)', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const ledger = ledgerOn(store, clock, 'stopping');
    for (let s = 0; s < 3; s += 1) {
      for (let i = 0; i < 20; i += 1) {
        clock.now += 50;
        ledger.record('shop', 'alpha', 'getPlan', 'answers2xx');
        await tick();
      }
      await ledger.flush(); // 20/s: the next early write after 30 more
    }
    for (let i = 0; i < 29; i += 1) ledger.record('shop', 'alpha', 'getPlan', 'answers2xx');
    // The graceful stop begins; a request that ends in the same turn (a detached provider call's usagePending, a
    // response finished in the same I/O phase) is counted before close() resumes from its first await.
    const closing = ledger.close();
    ledger.record('shop', 'alpha', 'getPlan', 'answers2xx');
    await closing;
    const report = await readUsage(store, { from: '2026-11-25', to: '2026-11-25' }, clock.now + 60_000);
    expect(report.totals[0]?.counts.answers2xx).toBe(90);
    expect(report.gaps).toEqual([]); // the final write, not an early one, is the last the store holds
  });

  test("a past day's key that keeps failing after midnight does not switch early writes off while today's writes succeed", async () => {
    const midnight = Date.parse('2026-11-26T00:00:00Z');
    const clock = { now: midnight - 2000 };
    // Yesterday's key is on a Cluster shard that went down at midnight; today's answers.
    const { store, inner, pump, writes } = latentStore(
      clock,
      4,
      (day) => day === '2026-11-25' && clock.now >= midnight,
    );
    const ledger = ledgerOn(store, clock, 'r');
    let recorded26 = 0;
    let surgeStart: number | undefined;
    let worst = { unwritten: 0, bound: 0 };
    await drive(ledger, clock, pump, {
      from: midnight - 2000,
      to: midnight + 4000,
      stepMs: 0.5,
      timerFrom: midnight - 1000,
      // 500/s, then a surge to 2,000/s at 00:00:03.100 (after the 03.000 timer flush ended)
      requestAt: (t) => (t < midnight + 3100 ? (t - midnight) % 2 === 0 : true),
      onRecord: () => {
        if (clock.now >= midnight) recorded26 += 1;
      },
      check: async () => {
        if (clock.now < midnight + 3100) return;
        surgeStart ??= writes.length;
        const report = await readUsage(inner, { from: '2026-11-26', to: '2026-11-26' }, clock.now + 60_000);
        const written = report.totals[0]?.counts.answers2xx ?? 0;
        const bound = report.gaps.reduce((sum, gap) => sum + gap.bound, 0);
        if (recorded26 - written - bound > worst.unwritten - worst.bound)
          worst = { unwritten: recorded26 - written, bound };
      },
    });
    // Today's key answers throughout: the surge (1,850 calls against a bound of 1,000) is written early.
    const todayWritesInSurge = writes.slice(surgeStart).filter((day) => day === '2026-11-26').length;
    expect(todayWritesInSurge).toBeGreaterThan(0);
    expect(worst.unwritten).toBeLessThanOrEqual(worst.bound);
  });

  test('a surge makes no stacked writes (one flush at a time) and no write per request', async () => {
    const T = Date.parse('2026-11-25T10:00:00Z');
    const clock = { now: T };
    const { store, pump, writes } = latentStore(clock, 3);
    let inFlight = 0;
    let most = 0;
    const counting: LedgerStore = {
      ...store,
      write: async (...args: Parameters<LedgerStore['write']>) => {
        inFlight += 1;
        most = Math.max(most, inFlight);
        try {
          return await store.write(...args);
        } finally {
          inFlight -= 1;
        }
      },
    };
    const ledger = new UsageLedger({
      store: counting,
      retentionDays: 400,
      now: () => clock.now,
      replicaId: 's',
      flushIntervalMs: 1000,
    });
    await drive(ledger, clock, pump, {
      from: T + 1,
      to: T + 6000,
      stepMs: 0.5,
      timerFrom: T + 1000,
      requestAt: (t) => (t < T + 3000 ? (t - T) % 50 === 0 : true), // 20/s, then 2,000/s
    });
    expect(most).toBe(1);
    // 5 timer flushes, the first count, and a handful while the count climbs: never one per request.
    expect(writes.length).toBeLessThanOrEqual(5 + 1 + 8);
  });

  test('a clock stepped back (NTP) during a surge keeps the unwritten count within the stored bound', async () => {
    const T = Date.parse('2026-11-25T10:00:00Z');
    const clock = { now: T };
    const { store, inner, pump } = latentStore(clock, 0);
    const ledger = ledgerOn(store, clock, 'b');
    let recorded = 0;
    let worst = { unwritten: 0, bound: 0 };
    await drive(ledger, clock, pump, {
      from: T + 1,
      to: T + 6000,
      stepMs: 1,
      timerFrom: T + 1000,
      requestAt: (t) => (t < T + 3000 ? (t - T) % 10 === 0 : true), // 100/s, then 1,000/s
      onRecord: () => (recorded += 1),
      check: async () => {
        const report = await readUsage(inner, { from: '2026-11-25', to: '2026-11-25' }, clock.now + 60_000);
        if (report.gaps.length === 0) return;
        const written = report.totals[0]?.counts.answers2xx ?? 0;
        const bound = report.gaps[0]?.bound ?? 0;
        if (recorded - written - bound > worst.unwritten - worst.bound)
          worst = { unwritten: recorded - written, bound };
      },
      offset: (t) => (t >= T + 2500 ? -2000 : 0),
    });
    expect(worst.unwritten).toBeLessThanOrEqual(worst.bound);
  });

  test('steady traffic with jitter makes no early writes (one HSET a second: the Redis budget)', async () => {
    const T = Date.parse('2026-11-25T10:00:00Z');
    const clock = { now: T };
    const { store, pump, writes } = latentStore(clock, 1);
    const ledger = ledgerOn(store, clock, 's');
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    // ~300 requests a second, Poisson-like arrivals (each 1 ms step a 30% chance), for 30 s.
    await drive(ledger, clock, pump, {
      from: T + 1,
      to: T + 30_000,
      stepMs: 1,
      timerFrom: T + 1000,
      requestAt: () => random() < 0.3,
    });
    // One write per timer flush (29) and a few at the start (the first count at once, the climb from it).
    expect(writes.length).toBeLessThanOrEqual(29 + 4);
  });
});
