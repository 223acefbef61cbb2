// One account's provider budget in this replica: admits calls from its buckets, learns from the provider's answers,
// and exchanges its part with the fleet now and then (never once per request).
import type { Logger } from 'pino';
import {
  type AccountBudget,
  DEFAULT_BURST_SECONDS,
  DEFAULT_SHARES,
  type Priority,
} from '../../config/budget-schema';
import { readRetryAfter } from '../../http/retry-after';
import type { BudgetMetrics } from '../../observability/budget-metrics';
import type { Clock } from '../../tokens';
import { BudgetRecordError, type BudgetStore, type FleetSignal } from './budget-store';
import { DemandMeter } from './demand-meter';
import {
  allocate,
  type BudgetEvent,
  DECREASE_COOLDOWN_MS,
  DECREASE_FACTOR,
  type ExchangeReply,
  NEAR_INTERVAL_MS,
  type PriorityRates,
  QUICK_INTERVAL_MS,
} from './fleet-state';
import { PriorityBuckets } from './priority-buckets';
import { type WaitEnd, WaitingLine } from './waiting-line';

export type RefusalReason = 'UPSTREAM_BUDGET_EXHAUSTED' | 'UPSTREAM_RATE_LIMITED';

export type Admission =
  | { readonly granted: true }
  | { readonly granted: false; readonly reason: RefusalReason; readonly retryAfterSeconds: number };

/** The one grant object: the fast path allocates nothing. */
export const GRANTED: Admission = Object.freeze({ granted: true as const });
/** The end of a wait whose caller left: nobody reads it, nothing is counted. */
const CALLER_LEFT: Admission = Object.freeze({
  granted: false as const,
  reason: 'UPSTREAM_BUDGET_EXHAUSTED' as const,
  retryAfterSeconds: 1,
});

export interface BudgetSnapshot {
  readonly account: string;
  readonly store: 'memory' | 'redis';
  readonly configuredRate?: number;
  readonly effectiveRate?: number;
  readonly learnedRate?: number;
  /** Epoch ms the pause ends; absent when not paused. */
  readonly pausedUntil?: number;
  readonly probing: boolean;
  /** Keeping to budget / replicas last seen: the shared store is unreachable. */
  readonly degraded: boolean;
  readonly replicas: number;
  /** This replica's rates by priority; absent when unbounded. */
  readonly allocation?: PriorityRates;
}

/** A wait for room; `cancel()`, when there, ends it at once (the caller left), nothing taken. */
export type PendingAdmission = Promise<Admission> & { cancel?(): void };

export interface ProviderBudget {
  /**
   * Room for one call of `priority`: synchronous when the local buckets have it (the common case), a Promise when
   * it has to wait (at most UPSTREAM_BUDGET_WAIT_MS). A refusal never reached the provider.
   */
  admit(priority?: Priority): Admission | PendingAdmission;
  /** A granted call that never reached the provider (a later refusal, the caller left): its token comes back. */
  giveBack(priority?: Priority): void;
  /** Every provider answer of a call admitted here: its status and its Retry-After header (if any). */
  observe(status: number, retryAfter?: string | readonly string[] | number): void;
  snapshot(): BudgetSnapshot;
  close(): Promise<void>;
}

export interface ProviderBudgetOptions {
  readonly accountId: string;
  /** The account's `budget`; undefined: unbounded until the provider's first 429. */
  readonly settings: AccountBudget | undefined;
  /** UPSTREAM_BUDGET_WAIT_MS. */
  readonly waitMs: number;
  /** UPSTREAM_RETRY_AFTER_MAX_SECONDS. */
  readonly retryAfterMaxSeconds: number;
  /** How long the fleet's one probe may stay unanswered before another replica may probe (the account's timeout). */
  readonly probeLeaseMs: number;
  readonly store: BudgetStore;
  /** The Redis-health owner (absent with the memory store): told of failed and recovered exchanges. */
  readonly health?: {
    healthy(): boolean;
    reportFailure(error?: unknown, noticedBy?: string): void;
    reportSuccess(): void;
  };
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: BudgetMetrics;
  /** Names this replica in the fleet record (default: random). */
  readonly replicaId?: string;
  /**
   * Whether this budget exports the account's gauges (default: always). False for a changed account's old unit while
   * it drains: its successor exports them, and the old one neither overwrites nor removes them.
   */
  readonly newest?: () => boolean;
}

const PRIORITY_INDEX: Readonly<Record<Priority, number>> = { sheddable: 0, standard: 1, critical: 2 };
const PRIORITY_NAMES: readonly Priority[] = ['sheddable', 'standard', 'critical'];
/** An exchange that takes longer is a failure (a hung Redis): the replica keeps to its own share meanwhile. */
const EXCHANGE_TIMEOUT_MS = 1_000;
/** A pause ending within this long after the one known is that pause (its 429s in flight, the clocks' jitter). */
const SAME_PAUSE_MS = 1_000;
/** The probe is claimed this long after the pause's end (the clocks' jitter between this replica and Redis). */
const PROBE_MARGIN_MS = 50;
/** A replica that lost the probe claim asks again after this long (the winner's probe may be lost too). */
const PROBE_RETRY_MS = 1_000;
const NOTICED_BY = 'provider budget';
/** At start, this many exchanges may come as soon as EARLY_SPACING_MS apart (the demand is not known yet). */
const STARTUP_EXCHANGES = 3;
/** An exchange brought early by a call that finds no room: at most one per this long, per replica. */
const EARLY_SPACING_MS = 150;
/** Demand "grew" (an early exchange is worth it) when a priority's measure exceeds what was reported by this. */
const GROWTH_FACTOR = 1.25;

export function createProviderBudget(options: ProviderBudgetOptions): ProviderBudget {
  return new AccountBudgetState(options);
}

class AccountBudgetState implements ProviderBudget {
  private readonly clock: Clock;
  private readonly replicaId: string;
  private readonly buckets: PriorityBuckets;
  private readonly line: WaitingLine;
  private readonly shares: Readonly<Record<Priority, number>>;
  private readonly burstSeconds: number;
  private unbounded: boolean;
  private effectiveRate: number | undefined;
  private learnedRate: number | undefined;
  private replicas = 1;
  private degraded = false;
  // The pause: until when (0: none), when it was set here, and the probe that ends it.
  private pausedUntil = 0;
  private pauseSetAt = 0;
  private probe: 'none' | 'claiming' | 'mine' | 'lost' = 'none';
  private probeUntil = 0;
  private lastDecreaseAt = Number.NEGATIVE_INFINITY;
  /** Demand by priority and the provider's acceptances, between exchanges. */
  private readonly meter: DemandMeter;
  /** The demand this replica reported at its last exchange (an early one is worth it only when demand grew). */
  private reported: PriorityRates = { sheddable: 0, standard: 0, critical: 0 };
  /** Until when the fleet holds this replica's allocation (its lease): failing exchanges keep it until then. */
  private leaseUntil = 0;
  private recordUnusable = false;
  private shortToldAt = Number.NEGATIVE_INFINITY;
  private exchanges = 0;
  private lastExchangeAt = Number.NEGATIVE_INFINITY;
  private intervalMs = NEAR_INTERVAL_MS;
  private exchanging: Promise<void> | undefined;
  private timer: ReturnType<Clock['setTimeout']> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private closed = false;
  private readonly unsubscribe: () => void;
  private readonly granted: { inc(value?: number): void }[];
  /** Grants since the counter was last read, by priority index (added to it by flushGrants). */
  private readonly grantedSinceRead = [0, 0, 0];
  private readonly stopFlushing: () => void;
  private readonly exhausted: { inc(value?: number): void }[];
  private readonly rateLimited: { inc(value?: number): void }[];

  constructor(private readonly options: ProviderBudgetOptions) {
    this.clock = options.clock;
    this.replicaId = options.replicaId ?? Math.random().toString(36).slice(2, 12);
    const now = this.clock.now();
    const settings = options.settings;
    this.shares = settings?.shares ?? DEFAULT_SHARES;
    this.burstSeconds = settings ? settings.burst / settings.requestsPerSecond : DEFAULT_BURST_SECONDS;
    this.buckets = new PriorityBuckets(this.burstSeconds, now);
    this.line = new WaitingLine(this.buckets, this.clock);
    this.unbounded = settings === undefined;
    this.effectiveRate = settings?.requestsPerSecond;
    this.meter = new DemandMeter(now);
    const { decisions } = options.metrics;
    const child = (decision: string) =>
      PRIORITY_NAMES.map((priority) => decisions.labels(options.accountId, priority, decision));
    this.granted = child('granted');
    this.exhausted = child('exhausted');
    this.rateLimited = child('rate_limited');
    for (const counters of [this.granted, this.exhausted, this.rateLimited])
      for (const c of counters) c.inc(0);
    this.stopFlushing = options.metrics.flushDecisionsBeforeRead(() => this.flushGrants());
    this.gauge(options.metrics.paused, 0);
    this.gauge(options.metrics.degraded, 0);
    this.reportRates();
    this.unsubscribe = options.store.subscribe((signal) => this.onSignal(signal));
    this.runExchange({ kind: 'none' }, true);
  }

  admit(priority: Priority = 'standard'): Admission | PendingAdmission {
    const index = PRIORITY_INDEX[priority];
    const now = this.clock.now();
    this.meter.ask(index, now);
    if (this.pausedUntil !== 0) return this.whilePaused(index);
    if (this.unbounded) return this.grant(index);
    if (!this.line.blocks(priority) && this.buckets.tryTake(priority, now)) return this.grant(index);
    return this.waitForRoom(priority, index, now);
  }

  giveBack(priority: Priority = 'standard'): void {
    if (this.unbounded) return;
    this.buckets.giveBack(priority, this.clock.now());
    this.line.serve();
  }

  observe(status: number, retryAfter?: string | readonly string[] | number): void {
    if (status === 429) {
      this.onProviderRateLimit(retryAfter);
      return;
    }
    this.meter.accepted += 1;
    if (this.probe === 'mine') this.endPause();
  }

  snapshot(): BudgetSnapshot {
    return {
      account: this.options.accountId,
      store: this.options.store.kind,
      configuredRate: this.options.settings?.requestsPerSecond,
      effectiveRate: this.effectiveRate,
      learnedRate: this.learnedRate,
      pausedUntil: this.pausedUntil === 0 ? undefined : this.pausedUntil,
      probing: this.probe === 'mine' || this.probe === 'claiming',
      degraded: this.degraded,
      replicas: this.replicas,
      allocation: this.unbounded ? undefined : this.buckets.currentRates(),
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.line.release();
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.unsubscribe();
    this.flushGrants();
    this.stopFlushing();
    this.removeGauges();
    await this.exchanging?.catch(() => undefined);
    await this.leave();
  }

  /**
   * Gives this replica's hold back to the fleet: it stops refilling first (what its gate holds, at most one call or
   * its share of the burst, is all it may still grant: a retired account's last retries), then deletes its record,
   * so the others may be granted its part at their next exchange instead of after its lease. Best effort: a store
   * that does not answer leaves the record to its lease.
   */
  private async leave(): Promise<void> {
    if (!this.unbounded) this.buckets.setRates(NOTHING, this.clock.now());
    await this.withTimeout(this.options.store.leave(this.replicaId)).catch((error: unknown) => {
      this.options.logger.warn(
        {
          account: this.options.accountId,
          err: { message: String((error as Error)?.message).slice(0, 200) },
        },
        'provider budget: could not give the hold back at close; the fleet frees it when its lease ends',
      );
    });
  }

  /** Sets one of the account's gauges, unless a newer unit of the account exports them or this one is closed. */
  private gauge(gauge: { set(labels: { account: string }, value: number): void }, value: number): void {
    if (this.closed) return;
    if (this.options.newest?.() ?? true) gauge.set({ account: this.options.accountId }, value);
  }

  /** A closed budget leaves no series behind (a removed account paused for good would fire the pause alert). */
  private removeGauges(): void {
    if (!(this.options.newest?.() ?? true)) return;
    const { metrics, accountId: account } = this.options;
    for (const gauge of [metrics.paused, metrics.degraded, metrics.effectiveRate, metrics.learnedRate])
      gauge.remove({ account });
    metrics.replicas.remove({ account });
    for (const priority of PRIORITY_NAMES) metrics.allocatedRate.remove({ account, priority });
  }

  /** The hot path: a number incremented; the counter learns it when it is read. */
  private grant(index: number): Admission {
    // After close (a retired account's last retries) nothing flushes any more: counted at once.
    if (this.closed) this.granted[index]?.inc();
    else this.grantedSinceRead[index] += 1;
    return GRANTED;
  }

  private flushGrants(): void {
    for (let i = 0; i < this.grantedSinceRead.length; i++) {
      const count = this.grantedSinceRead[i] as number;
      if (count === 0) continue;
      this.grantedSinceRead[i] = 0;
      this.granted[i]?.inc(count);
    }
  }

  private refuse(index: number, reason: RefusalReason, retryAfterSeconds: number): Admission {
    (reason === 'UPSTREAM_RATE_LIMITED' ? this.rateLimited : this.exhausted)[index].inc();
    return { granted: false, reason, retryAfterSeconds };
  }

  /**
   * No token now: the call waits in line for one (taken when granted) up to UPSTREAM_BUDGET_WAIT_MS, unless none
   * can come in time at the present rates and no fresher allocation is on its way: then 429 at once.
   */
  private waitForRoom(priority: Priority, index: number, now: number): Admission | PendingAdmission {
    const { waitMs } = this.options;
    const exchangeComing = this.exchangeSoon(now, waitMs);
    if (waitMs <= 0) return this.exhaustedFor(priority, index, now);
    const spend = this.buckets.spendRate(priority);
    const ahead = spend > 0 ? (this.line.ahead(priority) * 1000) / spend : 0;
    if (!exchangeComing && this.buckets.nextTokenInMs(priority, now) + ahead > waitMs)
      return this.exhaustedFor(priority, index, now);
    const waiting = this.line.wait(priority, now + waitMs);
    const pending = waiting.promise.then((end) => this.afterWait(priority, index, end)) as PendingAdmission;
    pending.cancel = waiting.cancel;
    return pending;
  }

  private afterWait(priority: Priority, index: number, end: WaitEnd): Admission {
    if (end === 'cancelled') return CALLER_LEFT;
    // A pause that began while this call waited holds it too (its token, if taken, goes back).
    if (this.pausedUntil !== 0) {
      if (end === 'granted') this.buckets.giveBack(priority, this.clock.now());
      return this.refuse(index, 'UPSTREAM_RATE_LIMITED', this.pauseSecondsLeft());
    }
    if (end === 'granted') return this.grant(index);
    return this.exhaustedFor(priority, index, this.clock.now());
  }

  private exhaustedFor(priority: Priority, index: number, now: number): Admission {
    const next = this.buckets.nextTokenInMs(priority, now);
    const seconds = Number.isFinite(next) ? Math.min(60, Math.max(1, Math.ceil(next / 1000))) : 1;
    return this.refuse(index, 'UPSTREAM_BUDGET_EXHAUSTED', seconds);
  }

  // --- the pause and its probe ---------------------------------------------------------------------------------

  private whilePaused(index: number): Admission | Promise<Admission> {
    const now = this.clock.now();
    // The probe is claimed a little after the pause's end as this replica knows it: the fleet's record keeps the end on
    // Redis's clock, and a claim that arrives before it there is lost (then asked again only PROBE_RETRY_MS later).
    if (now < this.pausedUntil + PROBE_MARGIN_MS)
      return this.refuse(index, 'UPSTREAM_RATE_LIMITED', this.pauseSecondsLeft());
    if (this.probe === 'mine' && now >= this.probeUntil) this.probe = 'none'; // our probe was never answered
    if (this.probe === 'lost' && now >= this.probeUntil) this.probe = 'none';
    if (this.probe !== 'none') return this.refuse(index, 'UPSTREAM_RATE_LIMITED', 1);
    this.probe = 'claiming';
    return this.claimProbe(index, now);
  }

  private async claimProbe(index: number, now: number): Promise<Admission> {
    const leaseMs = this.options.probeLeaseMs;
    let won: boolean;
    try {
      won = (await this.exchange({ kind: 'probe', leaseMs })).probeWon;
    } catch {
      won = true; // the fleet cannot be asked: this replica probes for itself
    }
    if (this.probe !== 'claiming') return this.refuse(index, 'UPSTREAM_RATE_LIMITED', 1); // resumed or re-paused
    this.probe = won ? 'mine' : 'lost';
    this.probeUntil = now + (won ? leaseMs : PROBE_RETRY_MS);
    if (!won) return this.refuse(index, 'UPSTREAM_RATE_LIMITED', 1);
    this.options.logger.info({ account: this.options.accountId }, 'provider budget: pause over, probing');
    return this.grant(index);
  }

  private pauseSecondsLeft(): number {
    return Math.max(1, Math.ceil((this.pausedUntil - this.clock.now()) / 1000));
  }

  private onProviderRateLimit(header: string | readonly string[] | number | undefined): void {
    const { accountId, retryAfterMaxSeconds, logger, metrics } = this.options;
    const now = this.clock.now();
    const reading = readRetryAfter(header, now, retryAfterMaxSeconds);
    if (reading.kind === 'ignored' || (reading.kind === 'pause' && reading.capped)) {
      const why = reading.kind === 'ignored' ? reading.why : `capped at ${retryAfterMaxSeconds} s`;
      metrics.retryAfterIgnored.inc({
        account: accountId,
        why: reading.kind === 'ignored' ? 'unusable' : 'capped',
      });
      logger.warn(
        { account: accountId, retryAfter: String(header).slice(0, 64), why },
        'provider Retry-After not taken as given',
      );
    }
    if (reading.kind === 'pause') {
      this.startPause(now + reading.seconds * 1000, true);
      return;
    }
    // The probe's answer without a usable Retry-After: the pause is over and AIMD takes over (kept "in flight"
    // instead, the fleet would answer 503 until the probe's lease ran out, a pause the provider never asked for).
    if (this.probe === 'mine') this.endPause();
    this.decrease(now);
  }

  private startPause(until: number, ours: boolean): void {
    // The 429s of calls already in flight repeat the same pause: one pause, one event. The fleet's copy of a pause
    // comes back moved between Redis's clock and this one by a few ms (a network round trip): the same pause too.
    // Taken for a new one, it reset a probe this replica had just won, and the fleet stayed paused for the probe's
    // lease (the account's timeout) with no probe sent.
    if (until <= this.pausedUntil + SAME_PAUSE_MS) return;
    const { accountId, logger, metrics } = this.options;
    const first = this.pausedUntil === 0;
    this.pausedUntil = until;
    this.pauseSetAt = this.clock.now();
    this.probe = 'none';
    this.line.release(); // the waiting calls read the pause and get 503
    this.gauge(metrics.paused, 1);
    if (first) metrics.pauses.inc({ account: accountId });
    if (!ours) return;
    logger.warn(
      { account: accountId, pausedForSeconds: Math.ceil((until - this.pauseSetAt) / 1000) },
      'provider answered 429 with Retry-After: account paused for the fleet',
    );
    this.runExchange({ kind: 'pause', until });
    this.options.store.publish({ kind: 'pause', until }).catch(() => undefined);
  }

  private endPause(): void {
    this.clearPause();
    this.options.logger.info(
      { account: this.options.accountId },
      'provider budget: probe answered, pause over',
    );
    this.runExchange({ kind: 'resume' });
    this.options.store.publish({ kind: 'resume' }).catch(() => undefined);
  }

  private clearPause(): void {
    this.pausedUntil = 0;
    this.probe = 'none';
    this.gauge(this.options.metrics.paused, 0);
  }

  /** A 429 without a usable Retry-After: the rate falls at once here, and for the fleet at the exchange. */
  private decrease(now: number): void {
    if (now - this.lastDecreaseAt < DECREASE_COOLDOWN_MS) return;
    this.lastDecreaseAt = now;
    const { accountId, logger, metrics } = this.options;
    metrics.decreases.inc({ account: accountId });
    if (this.closed) {
      // A retired account's last call: the fleet learns it (the record), this closed unit keeps nothing.
      void this.runExchange({ kind: 'decrease' });
      return;
    }
    if (this.unbounded) {
      // No budget yet: what this replica sent lately, lowered, until the fleet answers with the learned rate.
      const { accepted } = this.demandRequest(now);
      const rate = Math.max(0.1, accepted * DECREASE_FACTOR);
      this.unbounded = false;
      this.buckets.setRates(
        allocate(rate, { shares: this.shares, ...this.demandRequest(now) }, noOthers(), 1, false),
        now,
        1,
      );
    } else this.buckets.scale(DECREASE_FACTOR, now);
    logger.info({ account: accountId }, 'provider answered 429 without Retry-After: rate lowered');
    this.runExchange({ kind: 'decrease' }).then(() => {
      if (this.effectiveRate !== undefined)
        this.options.store.publish({ kind: 'decrease', rate: this.effectiveRate }).catch(() => undefined);
    });
  }

  private onSignal(signal: FleetSignal): void {
    const now = this.clock.now();
    // A pause never lasts longer from now than the cap, whoever published it (a forged or clock-skewed signal).
    if (signal.kind === 'pause')
      this.startPause(Math.min(signal.until, now + this.options.retryAfterMaxSeconds * 1000), false);
    else if (signal.kind === 'short') this.exchangeSoonAfter(now);
    else if (signal.kind === 'resume') {
      if (this.pausedUntil !== 0 && this.probe !== 'mine') {
        this.clearPause();
        // The rates this replica held through the pause are stale: it asks the fleet for its part now, not at its
        // next interval (seconds away when far from the limit; meanwhile its callers got 429).
        this.exchangeSoonAfter(now);
      }
    } else if (this.effectiveRate === undefined || signal.rate < this.effectiveRate) {
      if (this.unbounded) {
        // The fleet has just learned a limit where this replica knew none: its share of it, until the exchange.
        const share = allocate(
          signal.rate / this.replicas,
          { shares: this.shares, ...this.demandRequest(now) },
          noOthers(),
          1,
          false,
        );
        this.unbounded = false;
        this.buckets.setRates(share, now, this.burstSeconds);
      } else if (this.effectiveRate !== undefined) this.buckets.scale(signal.rate / this.effectiveRate, now);
      this.effectiveRate = signal.rate;
      this.learnedRate = signal.rate;
      this.reportRates();
    }
  }

  // --- exchanges with the fleet ----------------------------------------------------------------------------------

  /**
   * A call found no room: is a fresher allocation coming within `withinMs`? One is running, the next is due, or an
   * early one is worth it (at most one per EARLY_SPACING_MS, and only while the fleet may not know this replica's
   * demand yet: its first exchanges, or a priority's demand grew past what was reported): then it is started or
   * scheduled. A replica whose demand the fleet knows stays on its interval, however many calls it refuses.
   */
  private exchangeSoon(now: number, withinMs: number): boolean {
    if (this.exchanging) return true;
    if (this.timerAt - now <= withinMs) return true;
    if (this.exchanges >= STARTUP_EXCHANGES && !this.demandGrew(now)) return false;
    const at = Math.max(now, this.lastExchangeAt + EARLY_SPACING_MS);
    if (at - now > withinMs) return false;
    this.exchangeSoonAfter(now);
    return true;
  }

  /** The next exchange as soon as EARLY_SPACING_MS after the last allows (never two running at once). */
  private exchangeSoonAfter(now: number): void {
    if (this.exchanging || this.closed) return;
    const at = Math.max(now, this.lastExchangeAt + EARLY_SPACING_MS);
    if (at >= this.timerAt) return;
    if (at <= now) this.runExchange({ kind: 'none' }, true);
    else this.schedule(at - now);
  }

  /** Short of room for critical or standard demand: the others are told (at most once per EARLY_SPACING_MS). */
  private tellShort(now: number): void {
    if (now - this.shortToldAt < EARLY_SPACING_MS) return;
    this.shortToldAt = now;
    this.options.store.publish({ kind: 'short' }).catch(() => undefined);
  }

  private demandGrew(now: number): boolean {
    const { demand } = this.demandRequest(now);
    const grew = (p: Priority) => demand[p] > this.reported[p] * GROWTH_FACTOR + 1;
    return grew('critical') || grew('standard') || grew('sheddable');
  }

  /**
   * Periodic exchanges (`periodic`) measure demand and schedule the next; event exchanges (a pause, a decrease)
   * go at once and only carry the event. Failures are reported to the Redis-health owner and keep this replica
   * on budget / replicas last seen.
   */
  private runExchange(event: BudgetEvent, periodic = false): Promise<void> {
    const run = this.exchange(event, periodic).then(
      () => undefined,
      () => undefined,
    );
    if (periodic) {
      if (this.timer) this.clock.clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
      this.exchanging = run.finally(() => {
        this.exchanging = undefined;
        this.schedule();
      });
      return this.exchanging;
    }
    return run;
  }

  private schedule(inMs = this.intervalMs): void {
    if (this.closed) return;
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timerAt = this.clock.now() + inMs;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
      this.runExchange({ kind: 'none' }, true);
    }, inMs);
    this.timer.unref?.();
  }

  private async exchange(event: BudgetEvent, periodic = false): Promise<ExchangeReply> {
    const { store, health } = this.options;
    const now = this.clock.now();
    const request = this.demandRequest(now);
    if (periodic) {
      this.meter.restart(now);
      this.reported = request.demand;
      this.exchanges += 1;
      this.lastExchangeAt = now;
    }
    try {
      if (store.kind === 'redis' && health && !health.healthy())
        throw new Error('the shared store is reported unhealthy');
      const reply = await this.withTimeout(
        store.exchange({
          replicaId: this.replicaId,
          now,
          configuredRate: this.options.settings?.requestsPerSecond,
          shares: this.shares,
          demand: request.demand,
          accepted: request.accepted,
          using: this.unbounded ? NOTHING : this.buckets.currentRates(),
          maxPauseMs: this.options.retryAfterMaxSeconds * 1000,
          event,
        }),
      );
      if (this.closed) {
        // An event heard after close (a retired account's last call): the fleet has it; this replica's field goes.
        await this.leave();
        return reply;
      }
      health?.reportSuccess();
      this.apply(reply, now);
      return reply;
    } catch (error) {
      // Closed: nothing of this replica to degrade; a record the exchange may still have written ends with its lease.
      if (!this.closed) this.failed(error, now);
      throw error;
    }
  }

  /**
   * A failed exchange. Redis unreachable: told to the Redis-health owner. Redis answered with an error about the
   * record (a key of the wrong type, a script error): Redis is healthy, only this budget is not: logged, counted.
   */
  private failed(error: unknown, now: number): void {
    const { store, health, logger, accountId } = { ...this.options, accountId: this.options.accountId };
    if (error instanceof BudgetRecordError) {
      if (!this.recordUnusable)
        logger.error(
          { account: accountId, err: { message: error.message.slice(0, 200) } },
          'provider budget: the shared record is unusable, keeping to budget / replicas last seen',
        );
      this.recordUnusable = true;
    } else if (store.kind === 'redis' && health?.healthy()) health.reportFailure(error, NOTICED_BY);
    this.degrade(now);
  }

  private demandRequest(now: number): { demand: PriorityRates; accepted: number } {
    return this.meter.measure(now);
  }

  private withTimeout<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = this.clock.setTimeout(
        () => reject(new Error('budget exchange timed out')),
        EXCHANGE_TIMEOUT_MS,
      );
      timer.unref?.();
      promise.then(
        (value) => {
          this.clock.clearTimeout(timer);
          resolve(value);
        },
        (error) => {
          this.clock.clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  private apply(reply: ExchangeReply, sentAt: number): void {
    const { accountId, logger } = this.options;
    if (this.degraded) {
      this.degraded = false;
      this.gauge(this.options.metrics.degraded, 0);
      logger.info({ account: accountId }, 'provider budget: shared budget rejoined');
    }
    this.recordUnusable = false;
    if (reply.repaired > 0)
      logger.warn(
        { account: accountId, fields: reply.repaired },
        'provider budget: unreadable shared fields (not finite numbers) read as absent',
      );
    const now = this.clock.now();
    this.replicas = Math.max(1, reply.replicas);
    this.intervalMs = reply.intervalMs;
    this.leaseUntil = reply.leaseUntil;
    this.effectiveRate = reply.effectiveRate;
    this.learnedRate = reply.learnedRate;
    if (reply.allocation === undefined) this.unbounded = true;
    else {
      this.unbounded = false;
      this.buckets.setRates(reply.allocation, now, this.burstSeconds);
    }
    this.line.serve();
    if (reply.intervalMs === QUICK_INTERVAL_MS) this.tellShort(now);
    const pausedUntil = Math.min(reply.pausedUntil, now + this.options.retryAfterMaxSeconds * 1000);
    if (pausedUntil > this.pausedUntil) this.startPause(pausedUntil, false);
    else if (
      reply.pausedUntil === 0 &&
      this.pausedUntil !== 0 &&
      sentAt > this.pauseSetAt &&
      this.probe !== 'mine'
    )
      this.clearPause();
    this.reportRates();
  }

  /**
   * The store cannot be reached: while the fleet still holds this replica's lease (past the next exchange), it keeps
   * the allocation the fleet counts for it; after, budget / replicas last seen, for this replica alone, until the
   * store answers again.
   */
  private degrade(now: number): void {
    const { accountId, logger, metrics } = this.options;
    metrics.storeFailures.inc({ account: accountId });
    if (!this.degraded) {
      this.degraded = true;
      this.gauge(metrics.degraded, 1);
      if (!this.recordUnusable)
        logger.warn(
          { account: accountId, replicas: this.replicas },
          'provider budget: shared store unreachable, keeping to budget / replicas last seen',
        );
    }
    this.intervalMs = NEAR_INTERVAL_MS;
    if (this.effectiveRate === undefined) return;
    if (!this.unbounded && now + NEAR_INTERVAL_MS + EXCHANGE_TIMEOUT_MS < this.leaseUntil) return;
    const share = this.effectiveRate / this.replicas;
    this.unbounded = false;
    this.buckets.setRates(
      allocate(share, { shares: this.shares, ...this.demandRequest(now) }, noOthers(), 1, false),
      now,
      this.burstSeconds,
    );
    this.reportRates();
  }

  private reportRates(): void {
    if (this.closed || !(this.options.newest?.() ?? true)) return;
    const { accountId, metrics } = this.options;
    metrics.effectiveRate.set({ account: accountId }, this.effectiveRate ?? Number.POSITIVE_INFINITY);
    if (this.learnedRate === undefined) metrics.learnedRate.remove({ account: accountId });
    else metrics.learnedRate.set({ account: accountId }, this.learnedRate);
    metrics.replicas.set({ account: accountId }, this.replicas);
    const rates = this.buckets.currentRates();
    for (const priority of PRIORITY_NAMES)
      metrics.allocatedRate.set(
        { account: accountId, priority },
        this.unbounded ? Number.POSITIVE_INFINITY : rates[priority],
      );
  }
}

const NOTHING: PriorityRates = Object.freeze({ sheddable: 0, standard: 0, critical: 0 });

function noOthers() {
  const zero = { sheddable: 0, standard: 0, critical: 0 };
  return { demand: zero, allocation: zero };
}
