import { formatUsage, parseUsageArgs, UsageArgsError } from '../../../src/usage/internal/usage-format';
import type { UsageReport } from '../../../src/usage/internal/usage-report';

const TODAY = '2026-11-25';
const parse = (...argv: string[]) => parseUsageArgs(argv, TODAY, 400);

describe('npm run usage arguments', () => {
  test('defaults: this month to today, as a table', () => {
    expect(parse()).toEqual({
      from: '2026-11-01',
      to: TODAY,
      client: undefined,
      account: undefined,
      format: 'table',
    });
    expect(
      parse(
        '--from',
        '2026-10-01',
        '--to',
        '2026-10-31',
        '--client',
        'shop',
        '--account',
        'default',
        '--format',
        'csv',
      ),
    ).toEqual({
      from: '2026-10-01',
      to: '2026-10-31',
      client: 'shop',
      account: 'default',
      format: 'csv',
    });
  });

  test.each([
    [['--from', '2026-02-30'], /--from must be a calendar date/],
    [['--from', '25/11/2026'], /--from must be a calendar date/],
    [['--to', '2026-13-01'], /--to must be a calendar date/],
    [['--from', '2026-11-20', '--to', '2026-11-10'], /is after --to/],
    [['--to', '2027-01-01'], /is in the future/],
    [['--from', '2020-01-01'], /spans \d+ days; the ledger keeps 400/],
    [['--format', 'xml'], /--format must be one of table, csv, json/],
    [['--client', '../etc'], /--client must be a registry client id/],
    [['--account', 'Prod Account'], /--account must be an account id/],
    [['--bogus'], /Unknown option/],
    [['extra'], /positional/],
  ])('%j is a clear error', (argv, message) => {
    expect(() => parse(...argv)).toThrow(UsageArgsError);
    expect(() => parse(...argv)).toThrow(message);
  });
});

describe('npm run usage output', () => {
  const report: UsageReport = {
    from: '2026-11-24',
    skipped: 0,
    gaps: [],
    store: {},
    to: '2026-11-25',
    rows: [
      {
        day: '2026-11-24',
        client: 'shop',
        account: 'default',
        operation: 'getPlan',
        counts: { billable: 7, answers2xx: 7, cacheHits: 3 },
      },
      {
        day: '2026-11-25',
        client: 'shop',
        account: 'default',
        operation: 'getPlan',
        counts: { billable: 2, answers2xx: 2, 'refused:QUOTA_EXCEEDED': 4 },
      },
    ],
    totals: [
      {
        client: 'shop',
        account: 'default',
        counts: { billable: 9, answers2xx: 9, cacheHits: 3, 'refused:QUOTA_EXCEEDED': 4 },
      },
    ],
  };

  test('csv: a header, a line per day and operation, a total per client and account', () => {
    expect(formatUsage(report, 'csv').split('\n')).toEqual([
      'day,client,account,operation,billable,answers2xx,answers4xx,answers5xx,timeouts,cacheHits,coalesced,refused:QUOTA_EXCEEDED',
      '2026-11-24,shop,default,getPlan,7,7,0,0,0,3,0,0',
      '2026-11-25,shop,default,getPlan,2,2,0,0,0,0,0,4',
      'total,shop,default,*,9,9,0,0,0,3,0,4',
      '',
    ]);
  });

  test('json is the report; table aligns the columns; an empty range says so', () => {
    expect(JSON.parse(formatUsage(report, 'json'))).toEqual(report);
    const table = formatUsage(report, 'table').split('\n');
    expect(table[0]).toMatch(/^day\s+client\s+account\s+operation\s+billable/);
    expect(table.at(-2)).toMatch(/^total\s+shop\s+default\s+\*\s+9\s+9/);
    expect(formatUsage({ ...report, rows: [], totals: [] }, 'table')).toBe(
      'No usage recorded from 2026-11-24 to 2026-11-25 (UTC days).\n',
    );
  });
});
