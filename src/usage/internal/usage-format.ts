// `npm run usage`: its arguments (validated, with errors that say what is wrong) and its three output formats.
import { parseArgs } from 'node:util';
import { USAGE_COLUMNS } from './usage-ledger';
import type { UsageQuery, UsageReport } from './usage-report';

export type UsageFormat = 'table' | 'csv' | 'json';
export const USAGE_FORMATS: readonly UsageFormat[] = ['table', 'csv', 'json'];

export const USAGE_HELP = `Usage: npm run usage -- [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--client ID] [--account ID] [--format table|csv|json]

Reads the usage ledger (UTC days) from the gateway's Redis (same REDIS_* variables as the gateway).
  --from     first UTC day (default: the first day of the current month)
  --to       last UTC day, included (default: today)
  --client   only this registry client id
  --account  only this provider account id
  --format   table (default), csv or json`;

/** A bad argument: printed with the help, exit code 2. */
export class UsageArgsError extends Error {}

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;
const CLIENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ACCOUNT = /^[a-z0-9][a-z0-9-]{0,62}$/;

function day(name: string, value: string): number {
  const match = DAY.exec(value);
  const time = Date.parse(`${value}T00:00:00Z`);
  if (!match || Number.isNaN(time) || new Date(time).toISOString().slice(0, 10) !== value)
    throw new UsageArgsError(
      `--${name} must be a calendar date written YYYY-MM-DD (got "${value.slice(0, 40)}")`,
    );
  return time;
}

export interface UsageArguments extends UsageQuery {
  readonly format: UsageFormat;
}

/** `today` is the current UTC day; ranges longer than the ledger keeps (`retentionDays`) are refused. */
export function parseUsageArgs(argv: string[], today: string, retentionDays: number): UsageArguments {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        from: { type: 'string' },
        to: { type: 'string' },
        client: { type: 'string' },
        account: { type: 'string' },
        format: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new UsageArgsError((error as Error).message);
  }
  if (values.help) throw new UsageArgsError('');
  const to = (values.to as string | undefined) ?? today;
  const toTime = day('to', to);
  const from = (values.from as string | undefined) ?? `${to.slice(0, 7)}-01`;
  const fromTime = day('from', from);
  if (fromTime > toTime) throw new UsageArgsError(`--from (${from}) is after --to (${to})`);
  if (toTime > Date.parse(`${today}T00:00:00Z`) + 86_400_000)
    throw new UsageArgsError(
      `--to (${to}) is in the future: the ledger holds days up to today (${today}, UTC)`,
    );
  const days = (toTime - fromTime) / 86_400_000 + 1;
  if (days > retentionDays + 1)
    throw new UsageArgsError(
      `--from to --to spans ${days} days; the ledger keeps ${retentionDays} (USAGE_RETENTION_DAYS): ask for a shorter range`,
    );
  const format = (values.format as string | undefined) ?? 'table';
  if (!USAGE_FORMATS.includes(format as UsageFormat))
    throw new UsageArgsError(
      `--format must be one of ${USAGE_FORMATS.join(', ')} (got "${format.slice(0, 20)}")`,
    );
  const client = values.client as string | undefined;
  if (client !== undefined && !CLIENT.test(client))
    throw new UsageArgsError('--client must be a registry client id (letters, digits, ".", "_", "-")');
  const account = values.account as string | undefined;
  if (account !== undefined && !ACCOUNT.test(account))
    throw new UsageArgsError('--account must be an account id (lower-case letters, digits, dashes)');
  return { from, to, client, account, format: format as UsageFormat };
}

/** The fixed columns, then each refusal reason that occurs. */
function columnsOf(report: UsageReport): string[] {
  const refusals = new Set<string>();
  for (const row of report.rows)
    for (const column of Object.keys(row.counts)) if (column.startsWith('refused:')) refusals.add(column);
  return [...USAGE_COLUMNS, ...[...refusals].sort()];
}

export function formatUsage(report: UsageReport, format: UsageFormat): string {
  if (format === 'json') return `${JSON.stringify(report, null, 2)}\n`;
  const columns = columnsOf(report);
  const head = ['day', 'client', 'account', 'operation', ...columns];
  const body = report.rows.map((r) => [
    r.day,
    r.client,
    r.account,
    r.operation,
    ...columns.map((c) => String(r.counts[c] ?? 0)),
  ]);
  const totals = report.totals.map((t) => [
    'total',
    t.client,
    t.account,
    '*',
    ...columns.map((c) => String(t.counts[c] ?? 0)),
  ]);
  if (format === 'csv') return `${[head, ...body, ...totals].map((cells) => cells.join(',')).join('\n')}\n`;
  const all = [head, ...body, ...totals];
  const widths = head.map((_, i) => Math.max(...all.map((cells) => (cells[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((cell, i) => (i < 4 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join('  ');
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  if (report.rows.length === 0)
    return report.missing
      ? `No usage in this store from ${report.from} to ${report.to} (UTC days): see the note below.\n`
      : `No usage recorded from ${report.from} to ${report.to} (UTC days).\n`;
  return `${[line(head), rule, ...body.map(line), rule, ...totals.map(line)].join('\n')}\n`;
}

/**
 * What the figures cannot say on their own: a store reset (or a store newer than the range), and the replicas that
 * stopped without their final write with the bound of what they may hold. Never a quiet zero, never a false exact.
 */
export function usageNotes(report: UsageReport): string[] {
  const notes: string[] = [];
  if (report.missing?.reason === 'reset')
    notes.push(
      `the store was reset on ${report.missing.before}: figures before it are missing (the replicas running then wrote their count of that day again; earlier days and stopped replicas are lost)`,
    );
  else if (report.missing)
    notes.push(
      `this store holds the ledger since ${report.missing.before}: figures before it are missing (a new store, or one reset while no gateway ran)`,
    );
  for (const gap of report.gaps)
    notes.push(
      `${gap.day}: replica ${gap.replica} stopped without its final write (last written ${gap.lastWrite}): up to ${gap.bound} more requests may have been counted and never written`,
    );
  const bound = report.gaps.reduce((sum, gap) => sum + gap.bound, 0);
  if (bound > 0)
    notes.push(
      `so these figures are lower bounds: any column may be short by at most ${bound} (the provider's count lies within the ledger's count + ${bound})`,
    );
  return notes;
}
