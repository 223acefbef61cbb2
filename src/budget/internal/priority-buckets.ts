// This replica's part of the budget: one token bucket per priority, filled at the rates the fleet allocated it.
import type { Priority } from '../../config/budget-schema';
import type { PriorityRates } from './fleet-state';

/** Bucket indices: a priority may also spend the buckets of the priorities below it (never those above). */
const SHEDDABLE = 0;
const STANDARD = 1;
const CRITICAL = 2;
const SPENDABLE: Readonly<Record<Priority, readonly number[]>> = {
  critical: [CRITICAL, STANDARD, SHEDDABLE],
  standard: [STANDARD, SHEDDABLE],
  sheddable: [SHEDDABLE],
};

/**
 * Tokens are calls. A bucket holds at most `burstSeconds` of its rate (at least one call), so the replicas' buckets
 * together hold at most the account's burst (plus one call each). A level below zero is calls already promised to
 * waiting requests: each waits until its token would have arrived, in order.
 */
export class PriorityBuckets {
  private readonly rates = [0, 0, 0]; // calls per ms
  private readonly levels = [0, 0, 0];
  private readonly capacities = [1, 1, 1];
  private stamp: number;

  constructor(
    private burstSeconds: number,
    now: number,
  ) {
    this.stamp = now;
  }

  /** New rates from the fleet; what the buckets hold is kept (within the new capacities). */
  setRates(rates: Readonly<PriorityRates>, now: number, burstSeconds = this.burstSeconds): void {
    this.refill(now);
    this.burstSeconds = burstSeconds;
    this.set(SHEDDABLE, rates.sheddable);
    this.set(STANDARD, rates.standard);
    this.set(CRITICAL, rates.critical);
  }

  /** Scales every rate (a lowered fleet rate, before the next exchange brings the new allocation). */
  scale(factor: number, now: number): void {
    this.refill(now);
    for (let i = 0; i < 3; i += 1) this.set(i, this.rates[i] * 1000 * factor);
  }

  /** Takes a token now if one is there: the fast path, no allocation. */
  tryTake(priority: Priority, now: number): boolean {
    this.refill(now);
    const spendable = SPENDABLE[priority];
    for (let i = 0; i < spendable.length; i += 1) {
      const bucket = spendable[i];
      if (this.levels[bucket] >= 1) {
        this.levels[bucket] -= 1;
        return true;
      }
    }
    return false;
  }

  /**
   * Promises the soonest token of the buckets `priority` may spend, when it arrives within `maxWaitMs`: returns the
   * wait in ms (the token is taken), or -1 (nothing taken) when none arrives in time.
   */
  reserve(priority: Priority, now: number, maxWaitMs: number): number {
    this.refill(now);
    let best = -1;
    let bestWait = Number.POSITIVE_INFINITY;
    for (const bucket of SPENDABLE[priority]) {
      const rate = this.rates[bucket];
      if (rate <= 0) continue;
      const wait = Math.max(0, (1 - this.levels[bucket]) / rate);
      if (wait < bestWait) {
        bestWait = wait;
        best = bucket;
      }
    }
    if (best < 0 || bestWait > maxWaitMs) return -1;
    this.levels[best] -= 1;
    return Math.ceil(bestWait);
  }

  /** Time until the soonest token `priority` may spend, in ms (Infinity: none is coming). */
  nextTokenInMs(priority: Priority, now: number): number {
    this.refill(now);
    let soonest = Number.POSITIVE_INFINITY;
    for (const bucket of SPENDABLE[priority]) {
      const rate = this.rates[bucket];
      if (rate > 0) soonest = Math.min(soonest, Math.max(0, (1 - this.levels[bucket]) / rate));
    }
    return soonest;
  }

  /** Calls per second this replica may send now, by priority (for the snapshot). */
  currentRates(): PriorityRates {
    return {
      sheddable: this.rates[SHEDDABLE] * 1000,
      standard: this.rates[STANDARD] * 1000,
      critical: this.rates[CRITICAL] * 1000,
    };
  }

  private set(bucket: number, perSecond: number): void {
    this.rates[bucket] = perSecond / 1000;
    this.capacities[bucket] = Math.max(1, perSecond * this.burstSeconds);
    if (this.levels[bucket] > this.capacities[bucket]) this.levels[bucket] = this.capacities[bucket];
  }

  private refill(now: number): void {
    const elapsed = now - this.stamp;
    if (elapsed <= 0) return;
    this.stamp = now;
    for (let i = 0; i < 3; i += 1) {
      const level = this.levels[i] + elapsed * this.rates[i];
      this.levels[i] = level > this.capacities[i] ? this.capacities[i] : level;
    }
  }
}
