// Calls waiting for room in this replica's buckets (at most UPSTREAM_BUDGET_WAIT_MS): one line per priority, served
// highest priority first. A waiting call takes its token when it is granted, at the time it is granted: a timer that
// fires late finds the buckets refilled by the time elapsed and capped, never a backlog of promised calls.
import type { Priority } from '../../config/budget-schema';
import type { Clock } from '../../tokens';
import type { PriorityBuckets } from './priority-buckets';

const ORDER: readonly Priority[] = ['critical', 'standard', 'sheddable'];
const RANK: Readonly<Record<Priority, number>> = { sheddable: 0, standard: 1, critical: 2 };

/** How a wait ended: granted (the token is taken), out of time, or the caller left. */
export type WaitEnd = 'granted' | 'timeout' | 'cancelled';

interface Waiter {
  readonly deadline: number;
  readonly done: (end: WaitEnd) => void;
}

export class WaitingLine {
  private readonly lines: Record<Priority, Waiter[]> = { critical: [], standard: [], sheddable: [] };
  /** Waiters by rank: a call never jumps ahead of waiting calls of its priority or above. */
  private readonly waiting = [0, 0, 0];
  private timer: ReturnType<Clock['setTimeout']> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;

  constructor(
    private readonly buckets: PriorityBuckets,
    private readonly clock: Clock,
  ) {}

  /** Calls of `priority` or above are waiting: a new call of `priority` queues behind them. */
  blocks(priority: Priority): boolean {
    const rank = RANK[priority];
    for (let r = rank; r < 3; r += 1) if (this.waiting[r] > 0) return true;
    return false;
  }

  /** Waiting calls that `priority` would have ahead of it (its own and those above). */
  ahead(priority: Priority): number {
    let n = 0;
    for (let r = RANK[priority]; r < 3; r += 1) n += this.waiting[r];
    return n;
  }

  /** Waits for a token of `priority` until `deadline`; `cancel()` (the caller left) ends it, nothing taken. */
  wait(priority: Priority, deadline: number): { promise: Promise<WaitEnd>; cancel(): void } {
    let waiter: Waiter | undefined;
    const promise = new Promise<WaitEnd>((resolve) => {
      waiter = { deadline, done: resolve };
    });
    const mine = waiter as Waiter;
    this.lines[priority].push(mine);
    this.waiting[RANK[priority]] += 1;
    this.serve();
    const cancel = () => {
      const line = this.lines[priority];
      const at = line.indexOf(mine);
      if (at < 0) return;
      line.splice(at, 1);
      this.waiting[RANK[priority]] -= 1;
      mine.done('cancelled');
      this.serve();
    };
    return { promise, cancel };
  }

  /** Grants what the buckets hold now, ends the waits past their deadline, and sets the timer for the next. */
  serve(): void {
    const now = this.clock.now();
    let next = Number.POSITIVE_INFINITY;
    for (const priority of ORDER) {
      const line = this.lines[priority];
      while (line.length > 0) {
        const head = line[0] as Waiter;
        const granted = this.buckets.tryTake(priority, now);
        if (!granted && head.deadline > now) break;
        line.shift();
        this.waiting[RANK[priority]] -= 1;
        head.done(granted ? 'granted' : 'timeout');
      }
      if (line.length === 0) continue;
      const head = line[0] as Waiter;
      next = Math.min(next, head.deadline, now + this.buckets.nextTokenInMs(priority, now));
    }
    this.arm(next, now);
  }

  /** Ends every wait now (a pause began, the budget closes): each caller reads the state again. */
  release(): void {
    for (const priority of ORDER) {
      const line = this.lines[priority].splice(0);
      this.waiting[RANK[priority]] = 0;
      for (const waiter of line) waiter.done('timeout');
    }
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  private arm(at: number, now: number): void {
    if (at === this.timerAt && this.timer) return;
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = at;
    if (!Number.isFinite(at)) return;
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Number.POSITIVE_INFINITY;
        this.serve();
      },
      Math.max(1, Math.ceil(at - now)),
    );
    this.timer.unref?.();
  }
}
