// Quotas per client and provider account: reserve a unit before a call may reach the provider, commit it when the
// call was billable, release it when not. Units come from leases claimed from the fleet's counters, so the check
// is a few synchronous operations on a replica's memory and the fleet never grants more than the quota.
import { type CalendarPeriod, type PeriodKind, periodAt } from './calendar';
import type { ClaimingReplica, QuotaClaim, QuotaCounters, QuotaGrant } from './quota-counters';

/** A client's quota, already validated (positive integers, a known timezone). */
export interface QuotaLimits {
  readonly day?: number;
  readonly month?: number;
  readonly timeZone: string;
}

/** A unit held for one call: exactly one of the two, once; later calls are ignored. */
export interface QuotaReservation {
  /** The call was billable: the unit is spent. */
  commit(): void;
  /** It was not (cache, coalesced, refused, 5xx, timeout, the 401 retry's first call): the unit goes back. */
  release(): void;
}

export interface QuotaRefusal {
  readonly clientId: string;
  readonly accountId: string;
  readonly period: PeriodKind;
  readonly limit: number;
  /** The period's end: the first moment a call may succeed again. */
  readonly resetsAt: number;
  /** Whole seconds to `resetsAt`, at least 1: the `Retry-After`. */
  readonly retryAfterSeconds: number;
}

export type QuotaDecision =
  | { readonly allowed: true; readonly reservation: QuotaReservation }
  | { readonly allowed: false; readonly refusal: QuotaRefusal };

/** What the warnings and metrics hear about. */
export interface QuotaEvent {
  readonly clientId: string;
  readonly accountId: string;
  readonly period: PeriodKind;
  readonly periodId: string;
  readonly periodEndsAt: number;
  readonly timeZone: string;
  readonly limit: number;
  /** Units the fleet has claimed (or, at a threshold, this replica's estimate of the units used). */
  readonly used: number;
}

export interface QuotaGateOptions {
  readonly counters: QuotaCounters;
  /** The counter's key of one client, account and period in a timezone (one hash tag per client and account). */
  readonly keyOf: (
    clientId: string,
    accountId: string,
    period: PeriodKind,
    periodId: string,
    timeZone: string,
  ) => string;
  /** Where the replicas claiming for a client and account note themselves (same hash tag); absent: not counted. */
  readonly replicasKeyOf?: (clientId: string, accountId: string) => string;
  readonly replicaId?: string;
  /** The client's quota now (the registry may be reloaded); undefined: no quota. */
  readonly limitsOf: (clientId: string) => QuotaLimits | undefined;
  readonly now?: () => number;
  /** After every claim: the fleet's share used, for the gauge. */
  readonly onClaim?: (event: QuotaEvent) => void;
  /** A threshold (0.8, 1) crossed for the first time in this replica for this period. */
  readonly onThreshold?: (event: QuotaEvent, threshold: number) => void;
  /** A claim failed (Redis unreachable): units granted from the replica's own share. Undefined when it recovers. */
  readonly onOutage?: (error: unknown) => void;
  readonly onRecovery?: () => void;
  /**
   * The fleet's counter of a period was missing mid-period (a Redis restart without persistence, an eviction): it
   * was started again from what this replica knew (`used`), so the figure may be low. Once per lease.
   */
  readonly onCounterLost?: (event: QuotaEvent) => void;
  /** A lease's first local grant of an outage: its share (what the fleet had left / replicas last seen). */
  readonly onLocalShare?: (event: QuotaEvent, share: { replicas: number; units: number }) => void;
}

/** Thresholds that warn, as shares of the quota. */
export const QUOTA_THRESHOLDS = [0.8, 1] as const;
/** A lease lasts about this long at the rate seen since the last claim: one claim per ~15 s of a busy client (refilled at half). */
const LEASE_SECONDS = 30;
/** Never more than this share of what the fleet has left: leases shrink to one unit near the end. */
const LEASE_SHARE_OF_REMAINING = 1 / 8;
/** A quota the fleet has used up is asked again at most this often (units given back by stopped replicas). */
const EXHAUSTED_RECHECK_MS = 30_000;
/** Counters outlive their period by a day, so a late reader (the CLI, a slow replica) still finds them. */
const COUNTER_GRACE_MS = 86_400_000;
const MAX_CLAIM_ATTEMPTS = 100;
/** A replica that has not claimed for a client and account this long no longer counts among its replicas. */
const REPLICA_WINDOW_MS = 300_000;

/** The warnings of a quota: 80 % and 100 %, or only 100 % for a quota of 0 (used up from the start: one warning). */
function thresholdsOf(limit: number): { share: number; units: number }[] {
  const shares = limit === 0 ? [1] : QUOTA_THRESHOLDS;
  return shares.map((share) => ({ share, units: Math.ceil(share * limit) }));
}

class PeriodLease {
  available = 0;
  inFlight = 0;
  fleetTotal = 0;
  unsynced = 0;
  refillBelow = 0;
  exhaustedUntil = 0;
  reservedSinceClaim = 0;
  lastClaimAt: number;
  nextThreshold = 0;
  thresholds: { share: number; units: number }[];
  /** Replicas claiming for this client and account, as last heard from the store (the outage's divisor). */
  replicas = 1;
  /** Units this replica committed in the period: above 0, the fleet's counter cannot be missing unless it was lost. */
  committed = 0;
  lostReported = false;
  /** Units this replica may still grant on its own in the current outage; undefined outside one. */
  outageLeft: number | undefined;

  constructor(
    readonly kind: PeriodKind,
    public limit: number,
    readonly period: CalendarPeriod,
    readonly key: string,
    now: number,
  ) {
    this.lastClaimAt = now;
    this.thresholds = thresholdsOf(limit);
  }

  /** A reloaded registry changed the limit: it applies now (a refusal known in memory is asked again). */
  setLimit(limit: number): void {
    if (limit === this.limit) return;
    this.limit = limit;
    this.thresholds = thresholdsOf(limit);
    this.nextThreshold = 0;
    this.exhaustedUntil = 0;
  }

  /**
   * Gives up the unspent units (a reload): they leave this lease and the fleet's count. Returns the units the store
   * must be given back; units granted locally in an outage and not yet added to the store are simply dropped.
   */
  surrender(): number {
    const local = Math.min(this.unsynced, this.available);
    this.unsynced -= local;
    const shared = this.available - local;
    this.fleetTotal -= this.available;
    this.available = 0;
    this.refillBelow = 0;
    return shared;
  }

  /** Units wanted at the next claim: the rate seen times the lease length, capped by a share of what is left. */
  wanted(now: number, waiting: number): number {
    const seconds = Math.max(1000, now - this.lastClaimAt) / 1000;
    const byRate = Math.ceil((this.reservedSinceClaim / seconds) * LEASE_SECONDS);
    const cap = Math.max(1, Math.floor((this.limit - this.fleetTotal) * LEASE_SHARE_OF_REMAINING));
    return Math.max(1, Math.min(cap, Math.max(byRate, waiting)));
  }
}

interface Slot {
  readonly clientId: string;
  readonly accountId: string;
  limits: QuotaLimits;
  leases: PeriodLease[];
  claim?: Promise<void>;
  waiting: number;
}

function sameLimits(a: QuotaLimits, b: QuotaLimits): boolean {
  return a.day === b.day && a.month === b.month && a.timeZone === b.timeZone;
}

const SETTLED = { commit() {}, release() {} } satisfies QuotaReservation;
/** Clients without a quota: no state, no allocation. */
const UNLIMITED: QuotaDecision = { allowed: true, reservation: SETTLED };

class LeasedReservation implements QuotaReservation {
  private settled = false;
  constructor(
    private readonly gate: QuotaGate,
    private readonly slot: Slot,
    private readonly leases: PeriodLease[],
  ) {}

  commit(): void {
    if (this.settled) return;
    this.settled = true;
    this.gate.settle(this.slot, this.leases, true);
  }

  release(): void {
    if (this.settled) return;
    this.settled = true;
    this.gate.settle(this.slot, this.leases, false);
  }
}

export class QuotaGate {
  private readonly slots = new Map<string, Slot>();
  private readonly now: () => number;
  private outage = false;

  constructor(private readonly options: QuotaGateOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Synchronous while the replica's lease has units (the steady state); a promise only when a claim must be made
   * (the first call of a period, or the last units of a quota, leased one at a time).
   */
  reserve(clientId: string, accountId: string): QuotaDecision | Promise<QuotaDecision> {
    const limits = this.options.limitsOf(clientId);
    if (!limits) return UNLIMITED;
    const now = this.now();
    const slot = this.slotFor(clientId, accountId, limits, now);
    const taken = this.tryTake(slot, now);
    if (taken) return taken;
    return this.claimThenReserve(slot);
  }

  /** Gives unused units back to the fleet (graceful stop); errors are swallowed, the counters expire anyway. */
  async close(): Promise<void> {
    const now = this.now();
    const returns: { key: string; units: number }[] = [];
    for (const slot of this.slots.values())
      for (const lease of slot.leases)
        if (lease.available > 0 && now < lease.period.endsAt && lease.unsynced === 0)
          returns.push({ key: lease.key, units: lease.available });
    this.slots.clear();
    if (returns.length > 0) await this.options.counters.giveBack(returns).catch(() => undefined);
  }

  /**
   * @internal the reservation's end: a released unit is available again, a committed one may cross a threshold. A
   * lease a reload retired gives a released unit back to the store (its period still running): never lost.
   */
  settle(slot: Slot, leases: PeriodLease[], billable: boolean): void {
    for (const lease of leases) {
      lease.inFlight -= 1;
      const current = slot.leases.includes(lease);
      if (!billable) {
        if (current) lease.available += 1;
        else this.giveBackRetired(lease);
      } else {
        lease.committed += 1;
        if (current && lease.nextThreshold < lease.thresholds.length) this.checkThreshold(slot, lease);
      }
    }
  }

  private giveBackRetired(lease: PeriodLease): void {
    if (this.now() >= lease.period.endsAt) return; // its period ended: the counter expires with it
    if (lease.unsynced > 0) lease.unsynced -= 1;
    else void this.options.counters.giveBack([{ key: lease.key, units: 1 }]).catch(() => undefined);
  }

  private slotFor(clientId: string, accountId: string, limits: QuotaLimits, now: number): Slot {
    const name = `${clientId}\n${accountId}`;
    let slot = this.slots.get(name);
    if (!slot) {
      slot = { clientId, accountId, limits, leases: [], waiting: 0 };
      slot.leases = this.leasesFor(slot, now);
      this.slots.set(name, slot);
    } else if (slot.limits !== limits) {
      if (!sameLimits(slot.limits, limits)) this.reconfigure(slot, limits, now);
      else slot.limits = limits;
    }
    for (const lease of slot.leases)
      if (now >= lease.period.endsAt) {
        const period = periodAt(lease.kind, now, slot.limits.timeZone);
        const fresh = new PeriodLease(lease.kind, lease.limit, period, this.keyFor(slot, period), now);
        fresh.replicas = lease.replicas;
        slot.leases[slot.leases.indexOf(lease)] = fresh;
      }
    return slot;
  }

  /**
   * A reloaded registry changed the quota: the new limits apply now. A period whose counter stays (same kind and
   * timezone) keeps its lease and in-flight units; every lease's unspent units go back to the store, so none is lost
   * or counted twice; a lease whose counter changed (a new timezone, a period removed) is retired.
   */
  private reconfigure(slot: Slot, limits: QuotaLimits, now: number): void {
    const old = slot.leases;
    slot.limits = limits;
    slot.leases = this.leasesFor(slot, now).map((fresh) => {
      const kept = old.find((lease) => lease.key === fresh.key);
      if (!kept) return fresh;
      kept.setLimit(fresh.limit);
      return kept;
    });
    const returns: { key: string; units: number }[] = [];
    for (const lease of old) {
      const units = lease.surrender();
      if (units > 0 && now < lease.period.endsAt) returns.push({ key: lease.key, units });
    }
    if (returns.length > 0) void this.options.counters.giveBack(returns).catch(() => undefined);
  }

  private leasesFor(slot: Slot, now: number): PeriodLease[] {
    const leases: PeriodLease[] = [];
    for (const kind of ['day', 'month'] as const) {
      const limit = slot.limits[kind];
      if (limit === undefined) continue;
      const period = periodAt(kind, now, slot.limits.timeZone);
      leases.push(new PeriodLease(kind, limit, period, this.keyFor(slot, period), now));
    }
    return leases;
  }

  private keyFor(slot: Slot, period: CalendarPeriod): string {
    return this.options.keyOf(slot.clientId, slot.accountId, period.kind, period.id, slot.limits.timeZone);
  }

  /** The fast path: a unit of every period's lease, or a refusal known without asking; undefined: claim first. */
  private tryTake(slot: Slot, now: number): QuotaDecision | undefined {
    let ready = true;
    for (const lease of slot.leases) {
      if (lease.available >= 1) continue;
      if (lease.exhaustedUntil > now) return { allowed: false, refusal: this.refusal(slot, lease, now) };
      ready = false;
    }
    if (!ready) return undefined;
    let refill = false;
    for (const lease of slot.leases) {
      lease.available -= 1;
      lease.inFlight += 1;
      lease.reservedSinceClaim += 1;
      if (lease.available <= lease.refillBelow && lease.available > 0) refill = true;
    }
    if (refill && !slot.claim) void this.claimFor(slot);
    return { allowed: true, reservation: new LeasedReservation(this, slot, slot.leases.slice()) };
  }

  /**
   * Each claim either grants units (someone gets one) or finds the quota used up (then the refusal is known), so
   * this ends; the bound is only a guard against a counter store that grants nothing and refuses nothing.
   */
  private async claimThenReserve(slot: Slot): Promise<QuotaDecision> {
    slot.waiting += 1;
    try {
      for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
        await this.claimFor(slot);
        const now = this.now();
        const taken = this.tryTake(this.slotFor(slot.clientId, slot.accountId, slot.limits, now), now);
        if (taken) return taken;
      }
      const lease = slot.leases.find((l) => l.available < 1) ?? (slot.leases[0] as PeriodLease);
      return { allowed: false, refusal: this.refusal(slot, lease, this.now()) };
    } finally {
      slot.waiting -= 1;
    }
  }

  /** One claim at a time per slot; requests arriving meanwhile wait for it together. */
  private claimFor(slot: Slot): Promise<void> {
    slot.claim ??= this.runClaim(slot).finally(() => {
      slot.claim = undefined;
    });
    return slot.claim;
  }

  private async runClaim(slot: Slot): Promise<void> {
    const now = this.now();
    const leases = slot.leases.filter((l) => l.available <= l.refillBelow && l.exhaustedUntil <= now);
    if (leases.length === 0) return;
    const claims: QuotaClaim[] = leases.map((lease) => ({
      key: lease.key,
      want: lease.wanted(now, slot.waiting),
      limit: lease.limit,
      unsynced: lease.unsynced,
      expireAt: lease.period.endsAt + COUNTER_GRACE_MS,
      floor: lease.committed > 0 ? Math.max(lease.committed, lease.fleetTotal - lease.unsynced) : 0,
    }));
    let grants: QuotaGrant[];
    try {
      grants = await this.options.counters.claim(claims, this.claimingReplica(slot, now));
      if (this.outage) {
        this.outage = false;
        this.options.onRecovery?.();
      }
    } catch (error) {
      if (!this.outage) this.options.onOutage?.(error);
      this.outage = true;
      grants = leases.map((lease, i) => this.localGrant(slot, lease, claims[i] as QuotaClaim));
    }
    const after = this.now();
    leases.forEach((lease, i) => {
      const grant = grants[i];
      if (grant) this.apply(slot, lease, claims[i] as QuotaClaim, grant, after);
    });
  }

  private claimingReplica(slot: Slot, now: number): ClaimingReplica | undefined {
    const { replicasKeyOf, replicaId } = this.options;
    if (!replicasKeyOf || replicaId === undefined) return undefined;
    const key = replicasKeyOf(slot.clientId, slot.accountId);
    return { key, replicaId, now, windowMs: REPLICA_WINDOW_MS };
  }

  /**
   * Redis unreachable: the replica grants from its own share of what the fleet had left when it last heard, divided
   * by the replicas it last heard of (rounded up: the fleet exceeds the quota by less than one call per replica);
   * the units are added to the fleet's counter at the next claim that reaches Redis.
   */
  private localGrant(slot: Slot, lease: PeriodLease, claim: QuotaClaim): QuotaGrant {
    if (lease.outageLeft === undefined) {
      const remaining = Math.max(0, lease.limit - lease.fleetTotal);
      lease.outageLeft = Math.ceil(remaining / Math.max(1, lease.replicas));
      const share = { replicas: lease.replicas, units: lease.outageLeft };
      this.options.onLocalShare?.(this.event(slot, lease, lease.fleetTotal), share);
    }
    const granted = Math.max(0, Math.min(claim.want, lease.outageLeft));
    lease.outageLeft -= granted;
    lease.unsynced += granted;
    return { granted, total: lease.fleetTotal + granted };
  }

  private apply(slot: Slot, lease: PeriodLease, claim: QuotaClaim, claimed: QuotaGrant, now: number): void {
    if (!slot.leases.includes(lease)) return; // the period ended (or the limits changed) while the claim ran
    const grant = this.withinLimit(lease, claim, claimed);
    if (!this.outage) {
      lease.unsynced = 0;
      lease.outageLeft = undefined;
    }
    if (grant.replicas !== undefined) lease.replicas = Math.max(1, grant.replicas);
    lease.available += grant.granted;
    lease.fleetTotal = grant.total;
    lease.refillBelow = Math.floor(grant.granted / 2);
    lease.reservedSinceClaim = 0;
    lease.lastClaimAt = now;
    lease.exhaustedUntil =
      grant.granted === 0 && claim.want > 0 && claim.limit === lease.limit // trimmed by a reload: ask again
        ? Math.min(lease.period.endsAt, now + (this.outage ? 5_000 : EXHAUSTED_RECHECK_MS))
        : 0;
    const event = this.event(slot, lease, grant.total);
    if (claimed.lost && !lease.lostReported) {
      lease.lostReported = true;
      this.options.onCounterLost?.(event);
    }
    this.options.onClaim?.(event);
    if (lease.exhaustedUntil > 0 && grant.total >= lease.limit) this.crossAll(slot, lease, grant.total);
  }

  /**
   * A reload lowered the limit while the claim was out (it was granted under the old one): the units beyond the new
   * limit go back (to the store, or to the outage's unsynced count they were taken into), never granted.
   */
  private withinLimit(lease: PeriodLease, claim: QuotaClaim, grant: QuotaGrant): QuotaGrant {
    if (claim.limit === lease.limit) return grant;
    const excess = Math.min(grant.granted, Math.max(0, grant.total - lease.limit));
    if (excess === 0) return grant;
    if (this.outage) lease.unsynced = Math.max(0, lease.unsynced - excess);
    else void this.options.counters.giveBack([{ key: lease.key, units: excess }]).catch(() => undefined);
    return { ...grant, granted: grant.granted - excess, total: grant.total - excess };
  }

  /** Committed units the fleet has used as far as this replica can tell: claimed, minus its own unspent units. */
  private checkThreshold(slot: Slot, lease: PeriodLease): void {
    const used = lease.fleetTotal - lease.available - lease.inFlight;
    this.crossAll(slot, lease, used);
  }

  private crossAll(slot: Slot, lease: PeriodLease, used: number): void {
    for (
      let next = lease.thresholds[lease.nextThreshold];
      next !== undefined && used >= next.units;
      next = lease.thresholds[lease.nextThreshold]
    ) {
      lease.nextThreshold += 1;
      this.options.onThreshold?.(this.event(slot, lease, used), next.share);
    }
  }

  private event(slot: Slot, lease: PeriodLease, used: number): QuotaEvent {
    return {
      clientId: slot.clientId,
      accountId: slot.accountId,
      period: lease.kind,
      periodId: lease.period.id,
      periodEndsAt: lease.period.endsAt,
      timeZone: slot.limits.timeZone,
      limit: lease.limit,
      used,
    };
  }

  private refusal(slot: Slot, lease: PeriodLease, now: number): QuotaRefusal {
    return {
      clientId: slot.clientId,
      accountId: slot.accountId,
      period: lease.kind,
      limit: lease.limit,
      resetsAt: lease.period.endsAt,
      retryAfterSeconds: Math.max(1, Math.ceil((lease.period.endsAt - now) / 1000)),
    };
  }
}
