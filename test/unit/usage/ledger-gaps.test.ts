// The ledger knows what it may have lost: a replica that stopped without its final write is a gap with a bound (its
// peak rate over the unwritten interval), and a store that lost a replica's earlier count is named as reset.
import { Registry } from 'prom-client';
import { createUsage } from '../../../src/usage';
import { memoryLedgerStore } from '../../../src/usage/internal/ledger-store';
import { usageNotes } from '../../../src/usage/internal/usage-format';
import { UsageLedger } from '../../../src/usage/internal/usage-ledger';
import { readUsage } from '../../../src/usage/internal/usage-report';
import { ledgerOn } from '../../support/usage-ledgers';

const DAY = { from: '2026-11-25', to: '2026-11-25' };

/**
 * `calls` requests spread over `ms` milliseconds, one at a time: a write in flight ends between two of them, as it
 * does between requests (a replica writes early when its count climbs past the rate it last wrote).
 */
async function spread(ledger: UsageLedger, clock: { now: number }, calls: number, ms: number) {
  const start = clock.now;
  for (let i = 0; i < calls; i += 1) {
    clock.now = start + Math.floor((i * ms) / calls);
    ledger.record('shop', 'alpha', 'getPlan', 'answers2xx');
    ledger.record('shop', 'alpha', 'getPlan', 'billable');
    await new Promise(setImmediate);
  }
  clock.now = start + ms;
}

/** `calls` requests a second for `seconds` seconds, flushed every second. */
async function load(ledger: UsageLedger, clock: { now: number }, calls: number, seconds: number) {
  for (let s = 0; s < seconds; s += 1) {
    await spread(ledger, clock, calls, 1000);
    await ledger.flush();
  }
}

describe('what the ledger may have lost', () => {
  test('a replica that stopped without its final write is a gap bounded by its peak rate over two flush intervals', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const killed = ledgerOn(store, clock, 'killed');
    const stopped = ledgerOn(store, clock, 'stopped');
    await load(killed, clock, 40, 5);
    await load(stopped, clock, 10, 1);
    await stopped.close();
    // The killed replica counted 25 more that it never wrote: within the bound.
    for (let i = 0; i < 25; i += 1) killed.record('shop', 'alpha', 'getPlan', 'answers2xx');

    const report = await readUsage(store, DAY, clock.now + 60_000);
    // 40/s over two 1 s intervals: 80, or a little more (a window is measured from its first request, not its start).
    expect(report.gaps).toEqual([
      { day: '2026-11-25', replica: 'killed', lastWrite: expect.any(String), bound: expect.any(Number) },
    ]);
    const bound = report.gaps[0]?.bound ?? 0;
    expect(bound).toBeGreaterThanOrEqual(80);
    expect(bound).toBeLessThanOrEqual(86);
    expect(report.totals[0]?.counts.answers2xx).toBe(210);
    const notes = usageNotes(report);
    expect(notes[0]).toMatch(
      new RegExp(`replica killed stopped without its final write .*up to ${bound} more requests`),
    );
    expect(notes[1]).toContain(`the provider's count lies within the ledger's count + ${bound}`);
  });

  test('a replica whose traffic climbs after its last write writes early: killed mid-climb, what it held is within the bound', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const climbing = ledgerOn(store, clock, 'climbing');
    await load(climbing, clock, 20, 3);
    // A surge to 300 requests/s, and a SIGKILL 900 ms in, before the timer's next flush: at the rate it last wrote
    // (20/s) the stated bound would be 40 for 270 unwritten calls.
    await spread(climbing, clock, 270, 900);
    const report = await readUsage(store, DAY, clock.now + 60_000);
    const written = report.totals[0]?.counts.answers2xx ?? 0;
    expect(report.gaps).toHaveLength(1);
    expect(written).toBeGreaterThan(60);
    expect(60 + 270 - written).toBeLessThanOrEqual(report.gaps[0]?.bound ?? 0);
  });

  test('a replica killed in its first second, before any timer flush, is a gap within its bound (never unseen)', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const young = ledgerOn(store, clock, 'young');
    clock.now += 400; // started, idle, then its first callers: 150 requests in 500 ms
    await spread(young, clock, 150, 500);
    const report = await readUsage(store, DAY, clock.now + 60_000);
    const written = report.totals[0]?.counts.answers2xx ?? 0;
    expect(report.gaps.map((gap) => gap.replica)).toEqual(['young']);
    expect(150 - written).toBeLessThanOrEqual(report.gaps[0]?.bound ?? 0);
  });

  test('a store that refuses writes gets none early (not one per request): the timer alone tries again', async () => {
    const store = memoryLedgerStore();
    let down = true;
    let writes = 0;
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const ledger = new UsageLedger({
      store: {
        ...store,
        write: (...args: Parameters<typeof store.write>) => {
          writes += 1;
          return down ? Promise.reject(new Error('connect ECONNREFUSED')) : store.write(...args);
        },
      },
      retentionDays: 400,
      now: () => clock.now,
      replicaId: 'a',
      flushIntervalMs: 1000,
    });
    await load(ledger, clock, 200, 3);
    expect(writes).toBe(1 + 3); // the first count's write, then one per timer flush
    down = false;
    await load(ledger, clock, 200, 2);
    expect(writes).toBe(4 + 2); // the store answers: the timer's flushes write again, whole
    expect((await readUsage(store, DAY, clock.now)).totals[0]?.counts.answers2xx).toBe(1000);
    await spread(ledger, clock, 600, 500); // a surge past the rate it wrote: early writes are back
    expect(writes).toBeGreaterThan(6);
  });

  test('a busy CPU that stretches the flush windows widens the bound with them', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const slow = ledgerOn(store, clock, 'slow');
    for (let s = 0; s < 4; s += 1) {
      await spread(slow, clock, 60, 1500); // the timer fired late: 1.5 s windows at 40 requests/s
      await slow.flush();
    }
    const report = await readUsage(store, DAY, clock.now + 60_000);
    // Two 1.5 s windows at 40 requests/s (the configured second would say 80); the spread's rounding adds a few.
    const [bound] = report.gaps.map((gap) => gap.bound);
    expect(bound).toBeGreaterThanOrEqual(120);
    expect(bound).toBeLessThan(130);
  });

  test('a replica still writing is no gap, nor is a day it wrote after it ended', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T23:59:58Z') };
    const running = ledgerOn(store, clock, 'running');
    await load(running, clock, 5, 1);
    expect((await readUsage(store, DAY, clock.now + 2_000)).gaps).toEqual([]);
    // Midnight passes without a request: the flush still closes the ended day.
    clock.now = Date.parse('2026-11-26T00:00:01Z');
    await running.flush();
    expect((await readUsage(store, DAY, clock.now + 3_600_000)).gaps).toEqual([]);
  });

  test('a replica alive but idle (no request for a minute) is no gap: its count is complete', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const idle = ledgerOn(store, clock, 'idle');
    await load(idle, clock, 20, 3);
    // Quiet traffic (a night, a lull): the process runs, its timer keeps flushing, nothing new is counted.
    for (let s = 0; s < 60; s += 1) {
      clock.now += 1000;
      await idle.flush();
    }
    const report = await readUsage(store, DAY, clock.now);
    expect(report.gaps).toEqual([]);
    expect(usageNotes(report)).toEqual([]);
  });

  test('a replica killed right after a lull is still bounded by its rate before it (the lull does not lower it to 0)', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const replica = ledgerOn(store, clock, 'lull');
    await load(replica, clock, 20, 3);
    for (let s = 0; s < 60; s += 1) {
      clock.now += 1000;
      await replica.flush();
    }
    // Traffic resumes at the same rate; the replica is killed before its next write.
    for (let i = 0; i < 15; i += 1) replica.record('shop', 'alpha', 'getPlan', 'answers2xx');
    const report = await readUsage(store, DAY, clock.now + 60_000);
    expect(report.gaps).toHaveLength(1);
    expect(report.gaps[0]?.bound).toBeGreaterThanOrEqual(15);
  });

  test('a count of this replica missing from the store is a reset: noted once, and the report says so instead of zeros', async () => {
    let store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const resets: number[] = [];
    const backing = {
      write: (...args: Parameters<typeof store.write>) => store.write(...args),
      read: (day: string) => store.read(day),
      noteSince: (at: number) => store.noteSince(at),
      noteReset: (at: number, day: string, expireAt: number) => store.noteReset(at, day, expireAt),
      readMarker: () => store.readMarker(),
    };
    const ledger = new UsageLedger({
      store: backing,
      retentionDays: 400,
      now: () => clock.now,
      replicaId: 'a',
      onStoreReset: (at) => resets.push(at),
    });
    await load(ledger, clock, 3, 10);
    store = memoryLedgerStore(); // Redis restarted without persistence: everything gone
    await load(ledger, clock, 3, 3);
    expect(resets).toHaveLength(1);

    const report = await readUsage(backing, { from: '2026-11-01', to: '2026-11-25' }, clock.now);
    expect(report.missing).toEqual({ before: new Date(resets[0] as number).toISOString(), reason: 'reset' });
    expect(usageNotes(report)[0]).toMatch(
      /^the store was reset on 2026-11-25T10:00:1\d\.000Z: figures before it are missing/,
    );
    // The running replica wrote its whole day again: today's figure is whole.
    expect(report.totals[0]?.counts.billable).toBe(39);
  });

  test('an append-only store that lost only the first write (its last second before a crash) is no reset, however long it was down', async () => {
    let store = memoryLedgerStore();
    let down = false;
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const resets: number[] = [];
    const backing = {
      write: (...args: Parameters<typeof store.write>) =>
        down ? Promise.reject(new Error('connect ECONNREFUSED')) : store.write(...args),
      read: (day: string) => store.read(day),
      noteSince: (at: number) => store.noteSince(at),
      noteReset: (at: number, day: string, expireAt: number) => store.noteReset(at, day, expireAt),
      readMarker: () => store.readMarker(),
    };
    const ledger = new UsageLedger({
      store: backing,
      retentionDays: 400,
      now: () => clock.now,
      replicaId: 'a',
      onStoreReset: (at) => resets.push(at),
    });
    await load(ledger, clock, 3, 1); // the replica's first write of the day…
    // …is the last second the crashed Redis had not yet written to its append-only file; it restarts 30 s later.
    store = memoryLedgerStore();
    down = true;
    await load(ledger, clock, 3, 30);
    down = false;
    await load(ledger, clock, 3, 2);
    expect(resets).toEqual([]);
    expect((await readUsage(backing, DAY, clock.now)).missing).toBeUndefined();
  });

  test('a store that first held the ledger after the range began says so, instead of zeros', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    await load(ledgerOn(store, clock, 'a'), clock, 1, 1);
    const report = await readUsage(store, { from: '2026-11-20', to: '2026-11-24' }, clock.now);
    expect(report.rows).toEqual([]);
    // A replica's first count is written at once (so one killed in its first second is a gap, never unseen).
    expect(report.missing).toEqual({ before: '2026-11-25T10:00:00.000Z', reason: 'new-store' });
    expect(usageNotes(report)[0]).toContain('this store holds the ledger since 2026-11-25T10:00:00.000Z');
  });

  test('a single gateway idle for a minute reports no gap of its own on /metrics (the gap alert stays quiet)', async () => {
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const registry = new Registry();
    const usage = createUsage({
      keyPrefix: 'bff:',
      settings: { retentionDays: 400 },
      limitsOf: () => undefined,
      logger: { info: () => undefined, warn: () => undefined },
      registry,
      now: () => clock.now,
      flushIntervalMs: 1000,
    });
    try {
      for (let i = 0; i < 30; i += 1) usage.ledger.record('shop', 'alpha', 'getPlan', 'answers2xx');
      for (let s = 0; s < 60; s += 1) {
        clock.now += 1000;
        await usage.ledger.flush();
      }
      // Read as a scrape reads them: the calls gauge collects (one read of today's ledger) and sets the replicas one.
      const calls = await registry.getSingleMetric('gateway_usage_ledger_gap_calls')?.get();
      const replicas = await registry.getSingleMetric('gateway_usage_ledger_gap_replicas')?.get();
      expect(calls?.values.map((v) => v.value)).toEqual([0]);
      expect(replicas?.values.map((v) => v.value)).toEqual([0]);
    } finally {
      await usage.close();
    }
  });
});
