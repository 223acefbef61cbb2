// Reads the ledger for a range of UTC days and sums every replica's counts into rows and totals: what
// `npm run usage` prints and what a reconciliation with the provider's invoice starts from.
import type { LedgerStore } from './ledger-store';
import { type LedgerSnapshot, ROW_SEPARATOR, type UsageCounts } from './usage-ledger';

export interface UsageRow {
  readonly day: string;
  readonly client: string;
  readonly account: string;
  readonly operation: string;
  readonly counts: UsageCounts;
}

export interface UsageTotal {
  readonly client: string;
  readonly account: string;
  readonly counts: UsageCounts;
}

export interface UsageReport {
  readonly from: string;
  readonly to: string;
  readonly rows: UsageRow[];
  /** Per client and account over the whole range. */
  readonly totals: UsageTotal[];
}

export interface UsageQuery {
  readonly from: string;
  readonly to: string;
  readonly client?: string;
  readonly account?: string;
}

const DAY_MS = 86_400_000;

/** The UTC days from `from` to `to`, both included (validated by the caller). */
export function daysBetween(from: string, to: string): string[] {
  const days: string[] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += DAY_MS)
    days.push(new Date(t).toISOString().slice(0, 10));
  return days;
}

function add(into: UsageCounts, counts: UsageCounts): void {
  for (const [column, value] of Object.entries(counts))
    if (Number.isFinite(value)) into[column] = (into[column] ?? 0) + value;
}

/** A snapshot another writer spoiled is skipped, never a crash of the report. */
function parseSnapshot(text: string): LedgerSnapshot | undefined {
  try {
    const parsed = JSON.parse(text) as LedgerSnapshot;
    return parsed && typeof parsed.rows === 'object' && parsed.rows !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

export async function readUsage(store: LedgerStore, query: UsageQuery): Promise<UsageReport> {
  const rows: UsageRow[] = [];
  const totals = new Map<string, UsageTotal>();
  for (const day of daysBetween(query.from, query.to)) {
    const merged = new Map<string, UsageCounts>();
    for (const text of await store.read(day)) {
      const snapshot = parseSnapshot(text);
      for (const [name, counts] of Object.entries(snapshot?.rows ?? {})) {
        const [client = '', account = ''] = name.split(ROW_SEPARATOR);
        if (query.client !== undefined && client !== query.client) continue;
        if (query.account !== undefined && account !== query.account) continue;
        let row = merged.get(name);
        if (!row) {
          row = {};
          merged.set(name, row);
        }
        add(row, counts);
      }
    }
    for (const [name, counts] of [...merged].sort(([a], [b]) => a.localeCompare(b))) {
      const [client = '', account = '', operation = ''] = name.split(ROW_SEPARATOR);
      rows.push({ day, client, account, operation, counts });
      const totalName = client + ROW_SEPARATOR + account;
      let total = totals.get(totalName);
      if (!total) {
        total = { client, account, counts: {} };
        totals.set(totalName, total);
      }
      add(total.counts, counts);
    }
  }
  const sortedTotals = [...totals.values()].sort(
    (a, b) => a.client.localeCompare(b.client) || a.account.localeCompare(b.account),
  );
  return { from: query.from, to: query.to, rows, totals: sortedTotals };
}
