// One account's provider budget in this replica: admits calls from its buckets, learns from the provider's answers,
// and exchanges its part with the fleet now and then (never once per request).
import type { Logger } from 'pino';
import {
  type AccountBudget,
  DEFAULT_BURST_SECONDS,
  DEFAULT_SHARES,
  type Priority,
} from '../../config/budget-schema';
import type { BudgetMetrics } from '../../observability/budget-metrics';
import type { Clock } from '../../tokens';
import type { BudgetStore, FleetSignal } from './budget-store';
import {
  allocate,
  type BudgetEvent,
  DECREASE_COOLDOWN_MS,
  DECREASE_FACTOR,
  type ExchangeReply,
  NEAR_INTERVAL_MS,
  type PriorityRates,
} from './fleet-state';
import { PriorityBuckets } from './priority-buckets';
import { readRetryAfter } from './retry-after';

export type RefusalReason = 'UPSTREAM_BUDGET_EXHAUSTED' | 'UPSTREAM_RATE_LIMITED';

export type Admission =
  | { readonly granted: true }
  | { readonly granted: false; readonly reason: RefusalReason; readonly retryAfterSeconds: number };

/** The one grant object: the fast path allocates nothing. */
export const GRANTED: Admission = Object.freeze({ granted: true as const });

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

export interface ProviderBudget {
  /**
   * Room for one call of `priority`: synchronous when the local buckets have it (the common case), a Promise when
   * it has to wait (at most UPSTREAM_BUDGET_WAIT_MS). A refusal never reached the provider.
   */
  admit(priority?: Priority): Admission | Promise<Admission>;
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
}

const PRIORITY_INDEX: Readonly<Record<Priority, number>> = { sheddable: 0, standard: 1, critical: 2 };
const PRIORITY_NAMES: readonly Priority[] = ['sheddable', 'standard', 'critical'];
/** An exchange that takes longer is a failure (a hung Redis): the replica keeps to its own share meanwhile. */
const EXCHANGE_TIMEOUT_MS = 1_000;
/** A replica that lost the probe claim asks again after this long (the winner's probe may be lost too). */
const PROBE_RETRY_MS = 1_000;
/** Demand is measured over at least this long: the first exchange does not read one call as a rate. */
const MIN_MEASURE_MS = 250;
const NOTICED_BY = 'provider budget';
/**
 * Demand is reported a little above what was measured: a second's demand varies, and when the budget is short the
 * margin of the higher priorities is taken from the lower ones, which is the order the cuts should follow anyway.
 */
const DEMAND_MARGIN = 1.1;
/** At start, this many exchanges may come as soon as STARTUP_SPACING_MS apart (the demand is not known yet). */
const STARTUP_EXCHANGES = 3;
const STARTUP_SPACING_MS = 200;

export function createProviderBudget(options: ProviderBudgetOptions): ProviderBudget {
  return new AccountBudgetState(options);
}

class AccountBudgetState implements ProviderBudget {
  private readonly clock: Clock;
  private readonly replicaId: string;
  private readonly buckets: PriorityBuckets;
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
  // Demand and grants since the last exchange, by priority index.
  private readonly asked = [0, 0, 0];
  private acceptedCalls = 0;
  // The interval before the current one: rates are read over both, never over a few ms.
  private readonly askedBefore = [0, 0, 0];
  private acceptedBefore = 0;
  private measuredBefore: number;
  private exchanges = 0;
  private measuredFrom: number;
  private lastExchangeAt = Number.NEGATIVE_INFINITY;
  private intervalMs = NEAR_INTERVAL_MS;
  private exchanging: Promise<void> | undefined;
  private timer: ReturnType<Clock['setTimeout']> | undefined;
  private closed = false;
  private readonly unsubscribe: () => void;
  private readonly granted: { inc(value?: number): void }[];
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
    this.unbounded = settings === undefined;
    this.effectiveRate = settings?.requestsPerSecond;
    this.measuredFrom = now;
    this.measuredBefore = now;
    const { decisions } = options.metrics;
    const child = (decision: string) =>
      PRIORITY_NAMES.map((priority) => decisions.labels(options.accountId, priority, decision));
    this.granted = child('granted');
    this.exhausted = child('exhausted');
    this.rateLimited = child('rate_limited');
    for (const counters of [this.granted, this.exhausted, this.rateLimited])
      for (const c of counters) c.inc(0);
    options.metrics.paused.set({ account: options.accountId }, 0);
    options.metrics.degraded.set({ account: options.accountId }, 0);
    this.reportRates();
    this.unsubscribe = options.store.subscribe((signal) => this.onSignal(signal));
    this.runExchange({ kind: 'none' }, true);
  }

  admit(priority: Priority = 'standard'): Admission | Promise<Admission> {
    const index = PRIORITY_INDEX[priority];
    this.asked[index] += 1;
    if (this.pausedUntil !== 0) return this.whilePaused(index);
    if (this.unbounded || this.buckets.tryTake(priority, this.clock.now())) return this.grant(index);
    return this.waitForRoom(priority, index);
  }

  observe(status: number, retryAfter?: string | readonly string[] | number): void {
    if (status === 429) {
      this.onProviderRateLimit(retryAfter);
      return;
    }
    this.acceptedCalls += 1;
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
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.unsubscribe();
    await this.exchanging?.catch(() => undefined);
  }

  private grant(index: number): Admission {
    this.granted[index].inc();
    return GRANTED;
  }

  private refuse(index: number, reason: RefusalReason, retryAfterSeconds: number): Admission {
    (reason === 'UPSTREAM_RATE_LIMITED' ? this.rateLimited : this.exhausted)[index].inc();
    return { granted: false, reason, retryAfterSeconds };
  }

  /** No token now: one promised within the wait, else a fresher allocation from the fleet, else 429. */
  private waitForRoom(priority: Priority, index: number): Admission | Promise<Admission> {
    const now = this.clock.now();
    const { waitMs } = this.options;
    const wait = this.buckets.reserve(priority, now, waitMs);
    if (wait === 0) return this.grant(index);
    const exchange = this.exchangeEarly(now);
    if (wait > 0) return this.after(wait).then(() => this.afterWait(index));
    if (waitMs > 0 && exchange) return this.retryAfterExchange(exchange, priority, index, now + waitMs);
    return this.exhaustedFor(priority, index, now);
  }

  private async retryAfterExchange(
    exchange: Promise<void>,
    priority: Priority,
    index: number,
    deadline: number,
  ): Promise<Admission> {
    await Promise.race([exchange, this.after(deadline - this.clock.now())]);
    if (this.pausedUntil !== 0) return this.whilePaused(index);
    const now = this.clock.now();
    if (this.unbounded || this.buckets.tryTake(priority, now)) return this.grant(index);
    const wait = this.buckets.reserve(priority, now, Math.max(0, deadline - now));
    if (wait < 0) return this.exhaustedFor(priority, index, now);
    if (wait > 0) await this.after(wait);
    return this.afterWait(index);
  }

  private afterWait(index: number): Admission {
    // A pause that began while this call waited holds it too (its token is simply not used).
    if (this.pausedUntil !== 0) return this.refuse(index, 'UPSTREAM_RATE_LIMITED', this.pauseSecondsLeft());
    return this.grant(index);
  }

  private exhaustedFor(priority: Priority, index: number, now: number): Admission {
    const next = this.buckets.nextTokenInMs(priority, now);
    const seconds = Number.isFinite(next) ? Math.min(60, Math.max(1, Math.ceil(next / 1000))) : 1;
    return this.refuse(index, 'UPSTREAM_BUDGET_EXHAUSTED', seconds);
  }

  private after(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = this.clock.setTimeout(resolve, Math.max(0, ms));
      timer.unref?.();
    });
  }

  // --- the pause and its probe ---------------------------------------------------------------------------------

  private whilePaused(index: number): Admission | Promise<Admission> {
    const now = this.clock.now();
    if (now < this.pausedUntil) return this.refuse(index, 'UPSTREAM_RATE_LIMITED', this.pauseSecondsLeft());
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
    if (reading.kind === 'pause') this.startPause(now + reading.seconds * 1000, true);
    else this.decrease(now);
  }

  private startPause(until: number, ours: boolean): void {
    // The 429s of calls already in flight repeat the same pause: one pause, one event.
    if (until <= this.pausedUntil + (ours ? 1_000 : 0)) return;
    const { accountId, logger, metrics } = this.options;
    const first = this.pausedUntil === 0;
    this.pausedUntil = until;
    this.pauseSetAt = this.clock.now();
    this.probe = 'none';
    metrics.paused.set({ account: accountId }, 1);
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
    this.options.metrics.paused.set({ account: this.options.accountId }, 0);
  }

  /** A 429 without a usable Retry-After: the rate falls at once here, and for the fleet at the exchange. */
  private decrease(now: number): void {
    if (now - this.lastDecreaseAt < DECREASE_COOLDOWN_MS) return;
    this.lastDecreaseAt = now;
    const { accountId, logger, metrics } = this.options;
    metrics.decreases.inc({ account: accountId });
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
    if (signal.kind === 'pause') this.startPause(signal.until, false);
    else if (signal.kind === 'resume') {
      if (this.pausedUntil !== 0 && this.probe !== 'mine') this.clearPause();
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

  /** An exchange now if the last was at least a second ago (a refused call: demand grew), else none. */
  private exchangeEarly(now: number): Promise<void> | undefined {
    if (this.exchanging) return this.exchanging;
    // The first exchanges know little of the demand: the next two may come sooner, to learn it.
    const spacing = this.exchanges < STARTUP_EXCHANGES ? STARTUP_SPACING_MS : NEAR_INTERVAL_MS;
    if (now - this.lastExchangeAt < spacing) return undefined;
    return this.runExchange({ kind: 'none' }, true);
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
      this.exchanging = run.finally(() => {
        this.exchanging = undefined;
        this.schedule();
      });
      return this.exchanging;
    }
    return run;
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      this.runExchange({ kind: 'none' }, true);
    }, this.intervalMs);
    this.timer.unref?.();
  }

  private async exchange(event: BudgetEvent, periodic = false): Promise<ExchangeReply> {
    const { store, health } = this.options;
    const now = this.clock.now();
    const request = this.demandRequest(now);
    if (periodic) {
      for (let i = 0; i < 3; i += 1) this.askedBefore[i] = this.asked[i];
      this.asked.fill(0);
      this.acceptedBefore = this.acceptedCalls;
      this.acceptedCalls = 0;
      this.measuredBefore = this.measuredFrom;
      this.exchanges += 1;
      this.measuredFrom = now;
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
          event,
        }),
      );
      health?.reportSuccess();
      this.apply(reply, now);
      return reply;
    } catch (error) {
      if (store.kind === 'redis' && health?.healthy()) health.reportFailure(error, NOTICED_BY);
      this.degrade(now);
      throw error;
    }
  }

  private demandRequest(now: number): { demand: PriorityRates; accepted: number } {
    const seconds = Math.max(MIN_MEASURE_MS, now - this.measuredBefore) / 1000;
    const asked = (i: number) => ((this.asked[i] + this.askedBefore[i]) * DEMAND_MARGIN) / seconds;
    return {
      demand: { sheddable: asked(0), standard: asked(1), critical: asked(2) },
      accepted: (this.acceptedCalls + this.acceptedBefore) / seconds,
    };
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
      this.options.metrics.degraded.set({ account: accountId }, 0);
      logger.info({ account: accountId }, 'provider budget: shared budget rejoined');
    }
    const now = this.clock.now();
    this.replicas = Math.max(1, reply.replicas);
    this.intervalMs = reply.intervalMs;
    this.effectiveRate = reply.effectiveRate;
    this.learnedRate = reply.learnedRate;
    if (reply.allocation === undefined) this.unbounded = true;
    else {
      this.unbounded = false;
      this.buckets.setRates(reply.allocation, now, this.burstSeconds);
    }
    if (reply.pausedUntil > this.pausedUntil) this.startPause(reply.pausedUntil, false);
    else if (
      reply.pausedUntil === 0 &&
      this.pausedUntil !== 0 &&
      sentAt > this.pauseSetAt &&
      this.probe !== 'mine'
    )
      this.clearPause();
    this.reportRates();
  }

  /** The store cannot be reached: budget / replicas last seen, for this replica alone, until it answers again. */
  private degrade(now: number): void {
    const { accountId, logger, metrics } = this.options;
    metrics.storeFailures.inc({ account: accountId });
    if (!this.degraded) {
      this.degraded = true;
      metrics.degraded.set({ account: accountId }, 1);
      logger.warn(
        { account: accountId, replicas: this.replicas },
        'provider budget: shared store unreachable, keeping to budget / replicas last seen',
      );
    }
    this.intervalMs = NEAR_INTERVAL_MS;
    if (this.effectiveRate === undefined) return;
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

function noOthers() {
  const zero = { sheddable: 0, standard: 0, critical: 0 };
  return { demand: zero, allocation: zero };
}
