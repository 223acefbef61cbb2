// What this replica is asked for, by priority, and what the provider accepted: measured between exchanges and
// reported to the fleet as calls per second.
import type { PriorityRates } from './fleet-state';

/** The steady measure covers at least this much of the recent past (several short intervals if need be). */
const WINDOW_MS = 1_000;
/** The measure since the first call of the interval covers at least this long (one call is not read as a rate). */
const RECENT_MIN_MS = 250;
const MIN_MS = 100;
/** Intervals kept for the steady measure (short ones come in runs while allocations move). */
const KEPT = 32;
/**
 * Demand is reported a little above what was measured: a second's demand varies, and when the budget is short the
 * margin of the higher priorities is taken from the lower ones, which is the order the cuts should follow anyway.
 */
const DEMAND_MARGIN = 1.1;

interface Interval {
  readonly ms: number;
  readonly asked: readonly number[];
  readonly accepted: number;
}

export class DemandMeter {
  /** Calls asked for in the current interval, by priority index (sheddable, standard, critical). */
  readonly asked = [0, 0, 0];
  accepted = 0;
  private firstAskAt = 0;
  private readonly history: Interval[] = [];

  constructor(private from: number) {}

  ask(index: number, now: number): void {
    this.asked[index] += 1;
    if (this.firstAskAt === 0) this.firstAskAt = now;
  }

  /**
   * Calls per second: the larger of the steady measure (the current interval and the ones before it, over at least
   * WINDOW_MS) and the measure since the first call of this interval (a burst after a quiet spell is read as the
   * rate it is, not diluted over the quiet).
   */
  measure(now: number): { demand: PriorityRates; accepted: number } {
    let ms = now - this.from;
    const counts = [...this.asked];
    let accepted = this.accepted;
    for (let i = this.history.length - 1; i >= 0 && ms < WINDOW_MS; i -= 1) {
      const past = this.history[i] as Interval;
      ms += past.ms;
      accepted += past.accepted;
      for (let p = 0; p < 3; p += 1) counts[p] += past.asked[p] as number;
    }
    const seconds = Math.max(MIN_MS, ms) / 1000;
    const since = this.firstAskAt === 0 ? now : Math.max(this.from, this.firstAskAt);
    const recent = Math.max(RECENT_MIN_MS, now - since) / 1000;
    const rate = (p: number) => Math.max(counts[p] / seconds, this.asked[p] / recent) * DEMAND_MARGIN;
    return {
      demand: { sheddable: rate(0), standard: rate(1), critical: rate(2) },
      accepted: accepted / seconds,
    };
  }

  /** The interval ends (a periodic exchange): kept for the steady measure, counting starts again. */
  restart(now: number): void {
    this.history.push({ ms: Math.max(0, now - this.from), asked: [...this.asked], accepted: this.accepted });
    if (this.history.length > KEPT) this.history.shift();
    this.asked.fill(0);
    this.accepted = 0;
    this.firstAskAt = 0;
    this.from = now;
  }
}
