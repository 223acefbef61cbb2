// Reads the ledger for a range of UTC days and sums every replica's counts into rows and totals: what
// `npm run usage` prints and what a reconciliation with the provider's invoice starts from.
import type { LedgerStore, StoreMarker } from './ledger-store';
import {
  type LedgerSnapshot,
  ROW_SEPARATOR,
  STALE_FLUSHES,
  STALE_MS,
  type UsageCounts,
} from './usage-ledger';

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
  /** Stored entries that were not a replica's count (forged or spoiled): skipped, never a crash of the report. */
  readonly skipped: number;
  /** Replicas that stopped without their final write: what they may have counted and never written. */
  readonly gaps: LedgerGap[];
  /** The store's marker: since when it holds the ledger, when it was found reset. */
  readonly store: StoreMarker;
  /** Said instead of a quiet zero: figures of the range that this store cannot have. */
  readonly missing?: { readonly before: string; readonly reason: 'reset' | 'new-store' };
}

/** A replica's day that ends without its final write (SIGKILL, an OOM kill, a lost node). */
export interface LedgerGap {
  readonly day: string;
  readonly replica: string;
  /** ISO instant of its last write. */
  readonly lastWrite: string;
  /**
   * Upper bound on the requests it counted after that write: its peak rate over the unwritten interval (two flush
   * intervals: the second it had not written yet, and the calls in flight when it stopped). No column can miss more.
   */
  readonly bound: number;
}

/** The unwritten interval, in flush intervals: the one not yet written, and one for the calls in flight. */
const UNWRITTEN_FLUSHES = 2;

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

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** A count a replica could have written: a whole number of calls, at least 0 (never NaN, a string or 1e308). */
const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

/** Adds the valid counts of `counts` (a stored value of unknown shape); returns how many values it skipped. */
function add(into: UsageCounts, counts: unknown): number {
  if (!isObject(counts)) return 1;
  let skipped = 0;
  for (const [column, value] of Object.entries(counts))
    if (isCount(value) && column !== '__proto__') into[column] = (into[column] ?? 0) + value;
    else skipped += 1;
  return skipped;
}

/** A snapshot another writer spoiled (not JSON, null, rows that are not an object) is skipped. */
function parseSnapshot(text: unknown): LedgerSnapshot | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const parsed = JSON.parse(text) as unknown;
    return isObject(parsed) && isObject(parsed.rows) ? (parsed as unknown as LedgerSnapshot) : undefined;
  } catch {
    return undefined;
  }
}

/** A day's count that is neither final nor written after the day ended, and silent for a while: a gap. */
function gapOf(day: string, replica: string, snapshot: LedgerSnapshot, now: number): LedgerGap | undefined {
  const { at, every, rate } = snapshot;
  if (snapshot.final || !isCount(at) || !isCount(every) || !isCount(rate)) return undefined;
  const dayEnd = Date.parse(`${day}T00:00:00Z`) + DAY_MS;
  if (at >= dayEnd || now - at <= Math.max(STALE_MS, STALE_FLUSHES * every)) return undefined;
  const bound = Math.ceil((rate * UNWRITTEN_FLUSHES * every) / 1000);
  return { day, replica, lastWrite: new Date(at).toISOString(), bound };
}

/** What the range asks for that the store cannot hold: before its reset, or before it first held the ledger. */
function missingOf(
  marker: StoreMarker,
  query: UsageQuery,
  firstDayWithRows: string | undefined,
): UsageReport['missing'] {
  if (marker.resetAt && query.from <= marker.resetAt.slice(0, 10))
    return { before: marker.resetAt, reason: 'reset' };
  if (
    marker.since &&
    query.from < marker.since.slice(0, 10) &&
    (firstDayWithRows === undefined || firstDayWithRows >= marker.since.slice(0, 10))
  )
    return { before: marker.since, reason: 'new-store' };
  return undefined;
}

export async function readUsage(
  store: LedgerStore,
  query: UsageQuery,
  now: number = Date.now(),
): Promise<UsageReport> {
  const rows: UsageRow[] = [];
  const totals = new Map<string, UsageTotal>();
  const gaps: LedgerGap[] = [];
  let skipped = 0;
  for (const day of daysBetween(query.from, query.to)) {
    const merged = new Map<string, UsageCounts>();
    for (const [replica, text] of Object.entries(await store.read(day))) {
      const snapshot = parseSnapshot(text);
      if (!snapshot) skipped += 1;
      const gap = snapshot && gapOf(day, replica, snapshot, now);
      if (gap) gaps.push(gap);
      for (const [name, counts] of Object.entries(snapshot?.rows ?? {})) {
        const [client = '', account = '', operation] = name.split(ROW_SEPARATOR);
        if (!client || !account || !operation) {
          skipped += 1;
          continue;
        }
        if (query.client !== undefined && client !== query.client) continue;
        if (query.account !== undefined && account !== query.account) continue;
        let row = merged.get(name);
        if (!row) {
          row = {};
          merged.set(name, row);
        }
        skipped += add(row, counts);
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
  const marker = await store.readMarker();
  const missing = missingOf(marker, query, rows[0]?.day);
  return {
    from: query.from,
    to: query.to,
    rows,
    totals: sortedTotals,
    skipped,
    gaps,
    store: marker,
    ...(missing && { missing }),
  };
}

/** The gaps of one day (the metrics read today's at each scrape: one HGETALL). */
export async function readGaps(store: LedgerStore, day: string, now: number): Promise<LedgerGap[]> {
  const gaps: LedgerGap[] = [];
  for (const [replica, text] of Object.entries(await store.read(day))) {
    const snapshot = parseSnapshot(text);
    const gap = snapshot && gapOf(day, replica, snapshot, now);
    if (gap) gaps.push(gap);
  }
  return gaps;
}
