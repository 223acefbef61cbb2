// The usage ledger of one replica: counts per UTC day, client, account and operation, kept in a Map (recording is
// one increment) and written to the store in batches. Each write is this replica's whole count of the day, so a
// write that fails is simply made again at the next flush, and a retry never counts twice.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { utcDay } from './calendar';
import type { LedgerStore } from './ledger-store';

/** What one row counts. Refusals are `refused:<REASON>` (SPEC §3 reasons). */
export type UsageColumn =
  | 'billable'
  | 'answers2xx'
  | 'answers4xx'
  | 'answers5xx'
  | 'timeouts'
  | 'cacheHits'
  | 'coalesced'
  | `refused:${string}`;

export const USAGE_COLUMNS = [
  'billable',
  'answers2xx',
  'answers4xx',
  'answers5xx',
  'timeouts',
  'cacheHits',
  'coalesced',
] as const;

/** Counts of one row; columns never counted are absent. */
export type UsageCounts = Record<string, number>;

/** One replica's day as stored: rows named `client\taccount\toperation`. */
export interface LedgerSnapshot {
  readonly v: 1;
  readonly rows: Record<string, UsageCounts>;
}

export const ROW_SEPARATOR = '\t';

export interface UsageLedgerOptions {
  readonly store: LedgerStore;
  /** Days are kept this long after they end. */
  readonly retentionDays: number;
  readonly flushIntervalMs?: number;
  readonly now?: () => number;
  /** Names this replica's writes; a new one at every start, so a restart never overwrites an earlier count. */
  readonly replicaId?: string;
  readonly onFlush?: (result: 'ok' | 'failed', error?: unknown) => void;
  /** Counts written since the last flush, for the usage metrics (once per flush, never per request). */
  readonly onCounted?: (day: string, row: string, column: string, delta: number) => void;
}

const DAY_MS = 86_400_000;

export class UsageLedger {
  readonly replicaId: string;
  private readonly days = new Map<string, Map<string, UsageCounts>>();
  private readonly dirty = new Set<string>();
  private readonly expirySet = new Set<string>();
  private readonly reported = new Map<string, number>();
  private readonly now: () => number;
  private today = '';
  private todayEndsAt = 0;
  private todayRows = new Map<string, UsageCounts>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(private readonly options: UsageLedgerOptions) {
    this.now = options.now ?? Date.now;
    this.replicaId = options.replicaId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  }

  /** The hot path: a Map lookup and an increment. */
  record(clientId: string, accountId: string, operation: string, column: UsageColumn, count = 1): void {
    const now = this.now();
    if (now >= this.todayEndsAt) this.turnDay(now);
    const name = clientId + ROW_SEPARATOR + accountId + ROW_SEPARATOR + operation;
    let row = this.todayRows.get(name);
    if (!row) {
      row = {};
      this.todayRows.set(name, row);
    }
    row[column] = (row[column] ?? 0) + count;
    this.dirty.add(this.today);
  }

  /** Starts the periodic flush (unref'd: it never keeps the process alive). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.flush(), this.options.flushIntervalMs ?? 1000);
    this.timer.unref();
  }

  /** Writes every changed day; one flush at a time (a slow store delays the next, never stacks them). */
  flush(): Promise<void> {
    this.flushing ??= this.writeDirtyDays().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  /** The graceful stop: no more timer, and the last counts written (after any flush in flight). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flushing;
    await this.flush();
  }

  /** This replica's counts of a day (what it has recorded, written or not). */
  snapshot(day: string): LedgerSnapshot {
    return { v: 1, rows: Object.fromEntries(this.days.get(day) ?? []) };
  }

  private turnDay(now: number): void {
    this.today = utcDay(now);
    this.todayEndsAt = Date.parse(`${this.today}T00:00:00Z`) + DAY_MS;
    let rows = this.days.get(this.today);
    if (!rows) {
      rows = new Map();
      this.days.set(this.today, rows);
    }
    this.todayRows = rows;
  }

  private async writeDirtyDays(): Promise<void> {
    const days = [...this.dirty];
    this.dirty.clear();
    for (const day of days) {
      // Taken synchronously: counts recorded while the write is in flight make the day dirty again.
      const snapshot = this.snapshot(day);
      const expireAt = this.expirySet.has(day)
        ? undefined
        : Date.parse(`${day}T00:00:00Z`) + (1 + this.options.retentionDays) * DAY_MS;
      try {
        await this.options.store.write(day, this.replicaId, JSON.stringify(snapshot), expireAt);
        this.expirySet.add(day);
        this.report(day, snapshot);
        this.options.onFlush?.('ok');
      } catch (error) {
        this.dirty.add(day);
        this.options.onFlush?.('failed', error);
      }
    }
    this.forgetWrittenPastDays();
  }

  private report(day: string, snapshot: LedgerSnapshot): void {
    const onCounted = this.options.onCounted;
    if (!onCounted) return;
    for (const [row, counts] of Object.entries(snapshot.rows))
      for (const [column, value] of Object.entries(counts)) {
        const name = `${day}\n${row}\n${column}`;
        const delta = value - (this.reported.get(name) ?? 0);
        if (delta > 0) onCounted(day, row, column, delta);
        this.reported.set(name, value);
      }
  }

  /** Days before today that are written in full are only the store's now. */
  private forgetWrittenPastDays(): void {
    for (const day of this.days.keys())
      if (day !== this.today && !this.dirty.has(day)) {
        this.days.delete(day);
        this.expirySet.delete(day);
        for (const name of this.reported.keys()) if (name.startsWith(`${day}\n`)) this.reported.delete(name);
      }
  }
}
