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

/** One replica's day as stored: rows named `client\taccount\toperation`, and what the report needs to judge it. */
export interface LedgerSnapshot {
  readonly v: 1;
  readonly rows: Record<string, UsageCounts>;
  /** When this count was taken (ms since the epoch): the replica's last write. Absent in older records. */
  readonly at?: number;
  /**
   * The flush interval (ms) as it ran: the longest of the last flush windows, at least the configured one (a busy
   * CPU stretches it). A replica that wrote less recently than a few of these has stopped or lost the store.
   */
  readonly every?: number;
  /** The replica's peak rate over its last flushes that counted, in requests per second (billable not counted twice). */
  readonly rate?: number;
  /** The graceful stop's last write: the count is exact and complete. */
  readonly final?: true;
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
  /** This replica's earlier count of a day was missing from the store: it lost what it held (once per loss). */
  readonly onStoreReset?: (at: number) => void;
}

const DAY_MS = 86_400_000;
/** The rate written with each count is the peak of this many flush windows. */
const RATE_WINDOWS = 10;
/**
 * A replica writes early once it has counted this many flush intervals' worth at the rate it last wrote: a replica
 * whose traffic climbs (a start, a surge) writes again before the bound its store holds (two intervals at that rate)
 * falls short, and the half left covers the write in flight and the calls in flight.
 */
const WRITE_EARLY_INTERVALS = 1.5;
/** A window shorter than this share of the flush interval (an early write) is measured as this long. */
const SHORTEST_WINDOW_SHARE = 0.1;
/**
 * A count written this long ago and now missing means a reset; younger, it may be the last second an append-only
 * store loses in a crash (appendfsync everysec), which is not a reset of the ledger.
 */
const RESET_GRACE_MS = 5_000;
/**
 * A count silent this long (or this many flush intervals) is a replica that stopped or cannot reach the store (the
 * report's rule); a replica alive but idle writes its count again at half of it, so its silence is never taken for a stop.
 */
export const STALE_MS = 10_000;
export const STALE_FLUSHES = 5;

export class UsageLedger {
  readonly replicaId: string;
  private readonly days = new Map<string, Map<string, UsageCounts>>();
  private readonly dirty = new Set<string>();
  private readonly expirySet = new Set<string>();
  private readonly reported = new Map<string, number>();
  private readonly now: () => number;
  /** The configured flush interval (ms). */
  private readonly intervalMs: number;
  private today = '';
  private todayEndsAt = 0;
  private todayRows = new Map<string, UsageCounts>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  /** Requests counted since the last flush window began, and the rates of the last windows. */
  private countedInWindow = 0;
  /** Requests counted since the start (every column but `billable`), and the count at which to write early. */
  private counted = 0;
  private writeEarlyAt = 1;
  private windowStartedAt: number;
  /** When the window's first request was counted: a window idle at first is measured from it. */
  private windowFirstCountAt = 0;
  private readonly rates: number[] = [];
  private readonly windows: number[] = [];
  /** When this replica's count of each day first reached the store (a missing count later means a reset). */
  private readonly firstWrittenAt = new Map<string, number>();
  /** When this replica's count of each day was last written (an idle replica writes it again before it looks stopped). */
  private readonly lastWrittenAt = new Map<string, number>();
  private storeNoted = false;
  private pendingReset: { at: number; day: string; expiry: number } | undefined;
  private final = false;
  private closing = false;

  constructor(private readonly options: UsageLedgerOptions) {
    this.now = options.now ?? Date.now;
    this.intervalMs = options.flushIntervalMs ?? 1000;
    this.replicaId = options.replicaId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    this.windowStartedAt = this.now();
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
    if (column === 'billable') return;
    if (this.countedInWindow === 0) this.windowFirstCountAt = now;
    this.countedInWindow += count;
    this.counted += count;
    if (this.counted >= this.writeEarlyAt && this.flushing === undefined) void this.flush();
  }

  /** Starts the periodic flush (unref'd: it never keeps the process alive). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.flush(), this.intervalMs);
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
    // No early write from here on: one started while the last flush ends would stand in for the final write.
    this.closing = true;
    this.writeEarlyAt = Number.POSITIVE_INFINITY;
    // A turn at least (a request that ends with it is still counted), then until no flush is left in flight.
    do await this.flushing;
    while (this.flushing);
    this.final = true;
    for (const day of this.days.keys()) this.dirty.add(day);
    await this.flush();
  }

  /** This replica's counts of a day (what it has recorded, written or not). */
  snapshot(day: string): LedgerSnapshot {
    return { v: 1, rows: Object.fromEntries(this.days.get(day) ?? []) };
  }

  /** The count as written: the rows, when they were taken, the flush interval and the peak rate. */
  private stamped(day: string, at: number): LedgerSnapshot {
    return {
      ...this.snapshot(day),
      at,
      every: this.every(),
      rate: Math.ceil(Math.max(0, ...this.rates)),
      ...(this.final && { final: true as const }),
    };
  }

  /** How many more counts this replica may hold unwritten before it writes early, after `snapshot` is stored. */
  private earlyWriteAllowance(snapshot: LedgerSnapshot): number {
    const perInterval = ((snapshot.rate ?? 0) * (snapshot.every ?? 0)) / 1000;
    return Math.max(1, Math.floor(WRITE_EARLY_INTERVALS * perInterval));
  }

  /** The flush interval as it ran: the longest of the last windows, at least the configured one. */
  private every(): number {
    return Math.ceil(Math.max(this.intervalMs, ...this.windows));
  }

  /**
   * A replica with nothing new to write still says it is alive: today's count is written again (same rows, a new
   * `at`) once it is half as old as the report's silence; one HSET every few seconds, only while idle.
   */
  private keepAlive(now: number): void {
    const written = this.lastWrittenAt.get(this.today);
    if (written === undefined || this.dirty.has(this.today)) return;
    if (now - written >= Math.max(STALE_MS, STALE_FLUSHES * this.every()) / 2) this.dirty.add(this.today);
  }

  /** Closes the flush window: its rate joins the last few, of which the written rate is the peak. */
  private measureRate(now: number): void {
    const elapsed = now - this.windowStartedAt;
    if (elapsed <= 0) return;
    // An idle window leaves the peak as it was: a replica that resumes after a lull (its count written again while
    // idle) may be cut before its next write, at the rate it had before. A window that was idle at first (a start,
    // the end of a lull) is measured from its first request, not diluted by the quiet before it.
    if (this.countedInWindow > 0) {
      const busy = now - Math.max(this.windowStartedAt, this.windowFirstCountAt);
      const measured = Math.max(busy, SHORTEST_WINDOW_SHARE * this.intervalMs);
      this.rates.push((this.countedInWindow * 1000) / measured);
    }
    this.windows.push(elapsed);
    if (this.rates.length > RATE_WINDOWS) this.rates.shift();
    if (this.windows.length > RATE_WINDOWS) this.windows.shift();
    this.countedInWindow = 0;
    this.windowStartedAt = now;
  }

  private turnDay(now: number): void {
    // The day that ends is written once more after midnight, so its last count says it was complete (at >= day end).
    if (this.today && this.days.get(this.today)?.size) this.dirty.add(this.today);
    this.today = utcDay(now);
    this.todayEndsAt = Date.parse(`${this.today}T00:00:00Z`) + DAY_MS;
    // The new day's first count is written at once, as a start's is (unless the store refuses writes, or closing).
    if (Number.isFinite(this.writeEarlyAt)) this.writeEarlyAt = Math.min(this.writeEarlyAt, this.counted + 1);
    let rows = this.days.get(this.today);
    if (!rows) {
      rows = new Map();
      this.days.set(this.today, rows);
    }
    this.todayRows = rows;
  }

  private async writeDirtyDays(): Promise<void> {
    const now = this.now();
    if (now >= this.todayEndsAt && this.today) this.turnDay(now);
    this.measureRate(now);
    this.keepAlive(now);
    const countedAtSnapshot = this.counted;
    const days = [...this.dirty];
    this.dirty.clear();
    for (const day of days) {
      // Taken synchronously: counts recorded while the write is in flight make the day dirty again.
      const snapshot = this.stamped(day, now);
      const expiry = Date.parse(`${day}T00:00:00Z`) + (1 + this.options.retentionDays) * DAY_MS;
      const expireAt = this.expirySet.has(day) ? undefined : expiry;
      try {
        const created = await this.options.store.write(
          day,
          this.replicaId,
          JSON.stringify(snapshot),
          expireAt,
        );
        this.expirySet.add(day);
        const previous = this.lastWrittenAt.get(day);
        this.lastWrittenAt.set(day, now);
        await this.noticeStore(day, created, now, expiry, previous);
        this.report(day, snapshot);
        if (day === this.today && !this.closing)
          this.writeEarlyAt = countedAtSnapshot + this.earlyWriteAllowance(snapshot);
        this.options.onFlush?.('ok');
      } catch (error) {
        // No early write against a failing store (one per request): the timer's next flush tries again. A past
        // day's key failing alone (another shard) leaves today's early writes as they are.
        if (day === this.today) this.writeEarlyAt = Number.POSITIVE_INFINITY;
        this.dirty.add(day);
        this.options.onFlush?.('failed', error);
      }
    }
    this.forgetWrittenPastDays();
  }

  /**
   * Notes since when the store holds the ledger (once per replica start); a count of this replica that the store no
   * longer held is a reset: reported once, and noted in the store's marker (the report says it). A note that fails
   * is made again at the next flush; it never fails the write it follows.
   */
  private async noticeStore(
    day: string,
    created: boolean,
    now: number,
    expiry: number,
    previous: number | undefined,
  ): Promise<void> {
    const first = this.firstWrittenAt.get(day);
    if (first === undefined) this.firstWrittenAt.set(day, now);
    // The store lost the count after the previous write that reached it: lost though held since `first` for at least
    // the grace, it was reset; younger, it may be an append-only store's last second (however long it was then down).
    else if (created && previous !== undefined && previous - first >= RESET_GRACE_MS) {
      this.pendingReset = { at: now, day, expiry };
      this.options.onStoreReset?.(now);
    }
    try {
      if (this.pendingReset) {
        const { at, day: lost, expiry: expireAt } = this.pendingReset;
        await this.options.store.noteReset(at, lost, expireAt);
        this.pendingReset = undefined;
      }
      if (!this.storeNoted) {
        await this.options.store.noteSince(now);
        this.storeNoted = true;
      }
    } catch {
      // The store failed right after the write: the next flush notes it.
    }
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
        this.firstWrittenAt.delete(day);
        this.lastWrittenAt.delete(day);
        for (const name of this.reported.keys()) if (name.startsWith(`${day}\n`)) this.reported.delete(name);
      }
  }
}
