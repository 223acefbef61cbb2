// The report reads what is stored in Redis, which anyone with access may have written: forged or spoiled entries
// (null, garbage, wrong shapes, absurd numbers) are skipped and counted, and the valid counts still add up.
import { type LedgerStore, memoryLedgerStore } from '../../../src/usage/internal/ledger-store';
import { readUsage } from '../../../src/usage/internal/usage-report';

const storeOf = (values: unknown[]): LedgerStore => ({
  ...memoryLedgerStore(),
  read: async () =>
    Object.fromEntries(values.map((value, i) => [String(i), value])) as Record<string, string>,
});

const VALID = JSON.stringify({ v: 1, rows: { 'shop\tdefault\tplan': { billable: 3, cacheHits: 1 } } });

describe('usage report over forged ledger entries', () => {
  test('null, garbage and wrong shapes are skipped and counted; the valid replica counts are summed', async () => {
    const forged = [
      null,
      42,
      'not json',
      'null',
      '[]',
      '{"v":1}',
      '{"v":1,"rows":null}',
      '{"v":1,"rows":[1,2]}',
      JSON.stringify({ v: 1, rows: { 'shop\tdefault\tplan': null } }),
      JSON.stringify({ v: 1, rows: { 'shop\tdefault\tplan': 'lots' } }),
      JSON.stringify({
        v: 1,
        rows: {
          'shop\tdefault\tplan': {
            billable: 2,
            answers2xx: -5,
            cacheHits: '7',
            coalesced: 1.5,
            timeouts: 1e308,
          },
        },
      }),
      JSON.stringify({ v: 1, rows: { 'no-separators': { billable: 9 } } }),
      JSON.stringify({ v: 1, rows: { 'shop\tdefault\tplan': { ['__proto__']: 5 } } }),
    ];
    const report = await readUsage(storeOf([VALID, ...forged, VALID]), {
      from: '2026-11-25',
      to: '2026-11-25',
    });
    expect(report.rows).toEqual([
      {
        day: '2026-11-25',
        client: 'shop',
        account: 'default',
        operation: 'plan',
        counts: { billable: 8, cacheHits: 2 },
      },
    ]);
    expect(report.totals).toEqual([
      { client: 'shop', account: 'default', counts: { billable: 8, cacheHits: 2 } },
    ]);
    // 8 entries that are no snapshot, 2 rows that are no counts, 4 bad values, 1 row name, 1 forged column.
    expect(report.skipped).toBe(16);
  });
});
