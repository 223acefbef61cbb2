import { type LedgerStore, memoryLedgerStore } from '../../../src/usage/internal/ledger-store';
import { UsageLedger } from '../../../src/usage/internal/usage-ledger';
import { readUsage } from '../../../src/usage/internal/usage-report';

function ledgerOn(store: LedgerStore, clock: { now: number }, replicaId: string) {
  return new UsageLedger({ store, retentionDays: 400, now: () => clock.now, replicaId });
}

describe('usage ledger', () => {
  test('counts per day, client, account and operation, summed over replicas in the report', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const a = ledgerOn(store, clock, 'a');
    const b = ledgerOn(store, clock, 'b');
    for (let i = 0; i < 5; i++) a.record('shop', 'default', 'validateDocument', 'billable');
    a.record('shop', 'default', 'validateDocument', 'answers2xx', 5);
    b.record('shop', 'default', 'validateDocument', 'billable');
    b.record('shop', 'default', 'getPlan', 'cacheHits');
    b.record('crm', 'default', 'getPlan', 'refused:QUOTA_EXCEEDED');
    await a.flush();
    await b.flush();
    const report = await readUsage(store, { from: '2026-11-25', to: '2026-11-25' });
    expect(report.rows).toEqual([
      {
        day: '2026-11-25',
        client: 'crm',
        account: 'default',
        operation: 'getPlan',
        counts: { 'refused:QUOTA_EXCEEDED': 1 },
      },
      {
        day: '2026-11-25',
        client: 'shop',
        account: 'default',
        operation: 'getPlan',
        counts: { cacheHits: 1 },
      },
      {
        day: '2026-11-25',
        client: 'shop',
        account: 'default',
        operation: 'validateDocument',
        counts: { billable: 6, answers2xx: 5 },
      },
    ]);
    expect(report.totals).toEqual([
      { client: 'crm', account: 'default', counts: { 'refused:QUOTA_EXCEEDED': 1 } },
      { client: 'shop', account: 'default', counts: { cacheHits: 1, billable: 6, answers2xx: 5 } },
    ]);
    const onlyShop = await readUsage(store, {
      from: '2026-11-25',
      to: '2026-11-25',
      client: 'shop',
      account: 'default',
    });
    expect(onlyShop.totals.map((t) => t.client)).toEqual(['shop']);
  });

  test('a failed write is made again at the next flush, and never counts twice', async () => {
    const memory = memoryLedgerStore();
    let failing = true;
    const store: LedgerStore = {
      ...memory,
      write: (...args) =>
        failing ? Promise.reject(new Error('Connection is closed.')) : memory.write(...args),
    };
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const results: string[] = [];
    const ledger = new UsageLedger({
      store,
      retentionDays: 400,
      now: () => clock.now,
      replicaId: 'a',
      onFlush: (r) => results.push(r),
    });
    ledger.record('shop', 'default', 'getPlan', 'billable', 3);
    await ledger.flush();
    ledger.record('shop', 'default', 'getPlan', 'billable', 2);
    await ledger.flush();
    failing = false;
    await ledger.flush();
    await ledger.flush();
    expect(results).toEqual(['failed', 'failed', 'ok']);
    const report = await readUsage(memory, { from: '2026-11-25', to: '2026-11-25' });
    expect(report.totals[0]?.counts).toEqual({ billable: 5 });
  });

  test('a day ends at UTC midnight: the next counts go to the next day, the past day is written and forgotten', async () => {
    const store = memoryLedgerStore();
    const clock = { now: Date.parse('2026-11-25T23:59:59.500Z') };
    const ledger = ledgerOn(store, clock, 'a');
    ledger.record('shop', 'default', 'getPlan', 'billable');
    clock.now = Date.parse('2026-11-26T00:00:00.100Z');
    ledger.record('shop', 'default', 'getPlan', 'billable');
    ledger.record('shop', 'default', 'getPlan', 'billable');
    await ledger.close();
    const report = await readUsage(store, { from: '2026-11-25', to: '2026-11-26' });
    expect(report.rows.map((r) => [r.day, r.counts.billable])).toEqual([
      ['2026-11-25', 1],
      ['2026-11-26', 2],
    ]);
    expect(ledger.snapshot('2026-11-25').rows).toEqual({});
  });

  test('the first write of a day sets its expiry USAGE_RETENTION_DAYS after the day ends, later writes do not', async () => {
    const writes: (number | undefined)[] = [];
    const store: LedgerStore = {
      ...memoryLedgerStore(),
      write: async (_d, _r, _s, expireAt) => {
        writes.push(expireAt);
        return true;
      },
    };
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const ledger = new UsageLedger({ store, retentionDays: 400, now: () => clock.now, replicaId: 'a' });
    ledger.record('shop', 'default', 'getPlan', 'billable');
    await ledger.flush();
    ledger.record('shop', 'default', 'getPlan', 'billable');
    await ledger.flush();
    await ledger.flush(); // nothing new: no write
    expect(writes).toEqual([Date.parse('2026-11-26T00:00:00Z') + 400 * 86_400_000, undefined]);
  });

  test('usage metrics hear each flushed count once, as a delta', async () => {
    const deltas: [string, string, number][] = [];
    const clock = { now: Date.parse('2026-11-25T10:00:00Z') };
    const ledger = new UsageLedger({
      store: memoryLedgerStore(),
      retentionDays: 400,
      now: () => clock.now,
      replicaId: 'a',
      onCounted: (_day, row, column, delta) => deltas.push([row, column, delta]),
    });
    ledger.record('shop', 'default', 'getPlan', 'billable', 2);
    await ledger.flush();
    ledger.record('shop', 'default', 'getPlan', 'billable');
    await ledger.flush();
    expect(deltas).toEqual([
      ['shop\tdefault\tgetPlan', 'billable', 2],
      ['shop\tdefault\tgetPlan', 'billable', 1],
    ]);
  });

  test('a snapshot spoiled in the store is skipped by the report', async () => {
    const store = memoryLedgerStore();
    await store.write('2026-11-25', 'x', 'not json');
    await store.write(
      '2026-11-25',
      'y',
      JSON.stringify({ v: 1, rows: { 'a\tdefault\tgetPlan': { billable: 1 } } }),
    );
    const report = await readUsage(store, { from: '2026-11-25', to: '2026-11-25' });
    expect(report.totals).toEqual([{ client: 'a', account: 'default', counts: { billable: 1 } }]);
  });
});
