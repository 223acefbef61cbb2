// This replica's part of the budget: one token bucket per priority (the split the fleet allocated) behind one gate
// for the replica (its whole rate and its share of the account's burst). Levels are refilled by the wall time
// elapsed, measured with the clock at each call, and capped: however late the event loop runs, a bucket never holds
// more than its capacity, so no backlog of calls can go at once.
import type { Priority } from '../../config/budget-schema';
import type { PriorityRates } from './fleet-state';

/** Bucket indices: a priority may also spend the buckets of the priorities below it (never those above). */
const SHEDDABLE = 0;
const STANDARD = 1;
const CRITICAL = 2;
export const SPENDABLE: Readonly<Record<Priority, readonly number[]>> = {
  critical: [CRITICAL, STANDARD, SHEDDABLE],
  standard: [STANDARD, SHEDDABLE],
  sheddable: [SHEDDABLE],
};

/**
 * Tokens are calls, taken when the call is granted (never promised ahead). The gate is what bounds the replica:
 * over any window of T >= 1 s it grants at most `capacity + rate × T` calls. Its capacity is the replica's share of
 * the account's burst (`rate × burstSeconds`), at least one call; when that floor of one call is above the share,
 * the gate's rate is lowered by the difference (never below half the allocation), so that `capacity + rate` stays
 * `allocation × (1 + burstSeconds)`: summed over the fleet, at most the budget plus the burst in any second.
 * The buckets by priority only split the gate's calls (sheddable never spends more than its allocation).
 */
export class PriorityBuckets {
  private readonly rates = [0, 0, 0]; // calls per ms
  private readonly levels = [0, 0, 0];
  private readonly capacities = [1, 1, 1];
  private gateRate = 0; // calls per ms
  private gateCapacity = 1;
  private gate = 0;
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
    const total = rates.sheddable + rates.standard + rates.critical;
    const share = total * burstSeconds;
    this.gateCapacity = Math.max(1, share);
    const perSecond = Math.max(total / 2, total - (this.gateCapacity - share));
    this.gateRate = perSecond / 1000;
    if (this.gate > this.gateCapacity) this.gate = this.gateCapacity;
  }

  /** Scales every rate (a lowered fleet rate, before the next exchange brings the new allocation). */
  scale(factor: number, now: number): void {
    const [sheddable, standard, critical] = this.rates.map((r) => r * 1000 * factor);
    this.setRates({ sheddable, standard, critical }, now);
  }

  /** Takes a token now if one is there: the fast path, no allocation. */
  tryTake(priority: Priority, now: number): boolean {
    this.refill(now);
    if (this.gate < 1) return false;
    const spendable = SPENDABLE[priority];
    for (let i = 0; i < spendable.length; i += 1) {
      const bucket = spendable[i];
      if (this.levels[bucket] >= 1) {
        this.levels[bucket] -= 1;
        this.gate -= 1;
        return true;
      }
    }
    return false;
  }

  /** A token taken for a call that never went (the caller left, a later refusal): back where it came from. */
  giveBack(priority: Priority, now: number): void {
    this.refill(now);
    const bucket = SPENDABLE[priority][0];
    this.levels[bucket] = Math.min(this.capacities[bucket], this.levels[bucket] + 1);
    this.gate = Math.min(this.gateCapacity, this.gate + 1);
  }

  /** Time until `priority` may take a token, in ms (Infinity: none is coming at the present rates). */
  nextTokenInMs(priority: Priority, now: number): number {
    this.refill(now);
    let soonest = Number.POSITIVE_INFINITY;
    for (const bucket of SPENDABLE[priority]) {
      const rate = this.rates[bucket];
      if (rate > 0) soonest = Math.min(soonest, Math.max(0, (1 - this.levels[bucket]) / rate));
    }
    if (this.gate >= 1) return soonest;
    if (this.gateRate <= 0) return Number.POSITIVE_INFINITY;
    return Math.max(soonest, (1 - this.gate) / this.gateRate);
  }

  /** Calls per second `priority` may spend at most (its buckets and the gate), for waiting estimates. */
  spendRate(priority: Priority): number {
    let sum = 0;
    for (const bucket of SPENDABLE[priority]) sum += this.rates[bucket];
    return Math.min(sum, this.gateRate) * 1000;
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
    const gate = this.gate + elapsed * this.gateRate;
    this.gate = gate > this.gateCapacity ? this.gateCapacity : gate;
  }
}
