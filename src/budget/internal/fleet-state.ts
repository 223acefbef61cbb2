// The fleet's shared budget state and one exchange with it, in TypeScript: the memory store runs it as is, the
// Redis store runs the same steps in Lua (redis-budget-store.ts), and the integration tests hold the two equal.
import type { Priority } from '../../config/budget-schema';

/** Calls per second by priority. */
export interface PriorityRates {
  sheddable: number;
  standard: number;
  critical: number;
}

export type BudgetEvent =
  | { readonly kind: 'none' }
  /** The provider answered 429 without a usable Retry-After: lower the fleet's rate (AIMD). */
  | { readonly kind: 'decrease' }
  /** The provider answered 429 with Retry-After: the fleet pauses until `until` (epoch ms). */
  | { readonly kind: 'pause'; readonly until: number }
  /** The probe came back without a 429: the pause is over. */
  | { readonly kind: 'resume' }
  /** A pause has ended: claim the one probe of the fleet for `leaseMs`. */
  | { readonly kind: 'probe'; readonly leaseMs: number };

export interface ExchangeRequest {
  readonly replicaId: string;
  readonly now: number;
  /** The account's configured budget; undefined: none (unbounded until the provider's first 429). */
  readonly configuredRate: number | undefined;
  readonly shares: Readonly<Record<Priority, number>>;
  /** What this replica was asked for over its last interval, by priority (calls per second). */
  readonly demand: Readonly<PriorityRates>;
  /** What the provider accepted (answers other than 429) over its last interval, calls per second. */
  readonly accepted: number;
  /**
   * The rates this replica applies now, by priority (zero when unbounded): held for it in the fleet record until it
   * reports a lower figure, so capacity it gives up is granted to others only once it has stopped using it.
   */
  readonly using: Readonly<PriorityRates>;
  /** UPSTREAM_RETRY_AFTER_MAX_SECONDS in ms: no pause read from the record lasts longer from now. */
  readonly maxPauseMs: number;
  readonly event: BudgetEvent;
}

export interface ExchangeReply {
  /** This replica's rates until its next exchange; undefined: unbounded. */
  readonly allocation: PriorityRates | undefined;
  /** min(configured, learned); undefined: unbounded. */
  readonly effectiveRate: number | undefined;
  readonly learnedRate: number | undefined;
  /** Epoch ms until which the account is paused; 0: not paused. */
  readonly pausedUntil: number;
  /** This exchange claimed the fleet's one probe. */
  readonly probeWon: boolean;
  /** Live replicas, this one included. */
  readonly replicas: number;
  /** When to exchange next: often near the limit, seldom far from it, soon while allocations move. */
  readonly intervalMs: number;
  /** Epoch ms until which the fleet holds this allocation for this replica (its lease). */
  readonly leaseUntil: number;
  /** Shared fields of the record that were unreadable (NaN, Infinity, not numbers) and were read as absent. */
  readonly repaired: number;
}

/** After a 429, the rate the fleet was sending is multiplied by this. */
export const DECREASE_FACTOR = 0.85;
/**
 * A decrease starts from what the provider accepted when the fleet sent less than it was allowed, but never from
 * less than this part of the allowed rate: a reading taken over a mostly idle interval is no measure of the limit.
 */
export const READING_FLOOR = 0.9;
/** Fleet-wide, at most one decrease a second: the 429s of calls already in flight are one signal, not many. */
export const DECREASE_COOLDOWN_MS = 1_000;
/** A 429 this long after the last decrease reads the fleet's allowed rate as the provider's ceiling. */
export const CEILING_SETTLE_MS = 3_000;
/** The additive increase climbs to this part of the rate that drew the last 429, and stops: the 429s stop. */
export const CEILING_MARGIN = 0.9;
/** A ceiling is forgotten after this long without a 429: the fleet then probes upward again. */
export const CEILING_MEMORY_MS = 600_000;
/** Additive increase per second: this part of the ceiling (or of the learned rate), at least MIN_STEP. */
export const INCREASE_PER_SECOND = 0.05;
export const MIN_STEP = 0.05;
/** A learned rate never falls below this (one call every 10 s): the provider still hears from the fleet. */
export const MIN_LEARNED_RATE = 0.1;
export const NEAR_INTERVAL_MS = 1_000;
/** While a replica waits for capacity others give up, it exchanges this often. */
export const QUICK_INTERVAL_MS = 150;
/**
 * A replica that was just granted less than it applies confirms the lower figure this soon (the others get the
 * capacity it gives up only then): the time to apply the answer, and no more.
 */
export const RELEASE_INTERVAL_MS = 50;
export const FAR_INTERVAL_MS = 5_000;
/** The fleet is "near" its limit when demand reaches this part of the effective rate. */
export const NEAR_SHARE = 0.7;
/** A replica's allocation lives this long past its interval: a replica gone silent frees its part soon after. */
export const leaseMs = (intervalMs: number) => 2 * Math.max(intervalMs, NEAR_INTERVAL_MS) + 1_000;
/** Allocations within this many calls a second of each other are settled (no quick exchange for less). */
export const settleMargin = (rate: number) => Math.max(0.5, 0.02 * rate);
/** The whole record expires after this long without any exchange (an idle fleet leaves nothing behind). */
export const RECORD_TTL_MS = 600_000;

/** One replica's record in the fleet state. */
export interface ReplicaRecord {
  expiresAt: number;
  demand: PriorityRates;
  allocation: PriorityRates;
  /** What the fleet keeps for it: the larger of what it applies and what it was last granted, by priority. */
  hold: PriorityRates;
  accepted: number;
}

/** The shared part: what the fleet learned of the provider. */
export interface FleetRecord {
  learned?: number;
  ceiling?: number;
  ceilingAt: number;
  lastDecrease: number;
  raisedAt: number;
  pauseUntil: number;
  probeOwner?: string;
  probeUntil: number;
  replicas: Map<string, ReplicaRecord>;
}

export function emptyFleetRecord(): FleetRecord {
  return { ceilingAt: 0, lastDecrease: 0, raisedAt: 0, pauseUntil: 0, probeUntil: 0, replicas: new Map() };
}

const zero = (): PriorityRates => ({ sheddable: 0, standard: 0, critical: 0 });

/** Applies one replica's exchange to the fleet record (mutated) and returns the replica's answer. */
export function exchangeWithFleet(fleet: FleetRecord, request: ExchangeRequest): ExchangeReply {
  const { now } = request;
  const others = { n: 0, demand: zero(), allocation: zero(), accepted: 0 };
  for (const [id, replica] of fleet.replicas) {
    if (id === request.replicaId) continue;
    if (replica.expiresAt <= now) {
      fleet.replicas.delete(id);
      continue;
    }
    others.n += 1;
    others.accepted += replica.accepted;
    addInto(others.demand, replica.demand);
    // What the others hold, not what they were last granted: a replica that was just cut may still be using more.
    addInto(others.allocation, replica.hold);
  }
  // A pause never lasts longer from now than the cap, whoever wrote it (a forged or clock-skewed record).
  fleet.pauseUntil = Math.min(fleet.pauseUntil, now + request.maxPauseMs);
  const probeWon = applyEvent(fleet, request, {
    reported: others.accepted + request.accepted,
    // The others' readings may be a whole interval old: an even share of this replica's fresh one bounds them below.
    // A bound, not a reading: a replica that drew more than its even share lifts it above what the fleet sent.
    bound: Math.max(others.accepted + request.accepted, request.accepted * (others.n + 1)),
  });
  raiseAdditively(fleet, request);
  const effectiveRate = effective(request.configuredRate, fleet.learned);
  const replicas = others.n + 1;
  const fleetDemand = sum(others.demand) + sum(request.demand);
  const near =
    effectiveRate !== undefined &&
    (fleetDemand >= NEAR_SHARE * effectiveRate || fleet.learned !== undefined || fleet.pauseUntil > 0);
  const granted =
    effectiveRate === undefined ? undefined : allocateWanted(effectiveRate, request, others, replicas);
  const allocation = granted?.grant;
  // Soon again while this replica gives up capacity (the others get it once it reports the lower figure) or was
  // granted less of critical and standard than it wants (capacity others are giving up).
  const margin = effectiveRate === undefined ? 0 : settleMargin(effectiveRate);
  const releasing = granted !== undefined && sum(request.using) - sum(granted.grant) > margin;
  const short = granted !== undefined && granted.short > margin;
  const soon = releasing ? RELEASE_INTERVAL_MS : short ? QUICK_INTERVAL_MS : NEAR_INTERVAL_MS;
  const intervalMs = near ? soon : FAR_INTERVAL_MS;
  const expiresAt = now + leaseMs(intervalMs);
  const mine = allocation ? { ...allocation } : zero();
  fleet.replicas.set(request.replicaId, {
    expiresAt,
    demand: { ...request.demand },
    allocation: mine,
    hold: {
      critical: Math.max(mine.critical, request.using.critical),
      standard: Math.max(mine.standard, request.using.standard),
      sheddable: Math.max(mine.sheddable, request.using.sheddable),
    },
    accepted: request.accepted,
  });
  return {
    allocation,
    effectiveRate,
    learnedRate: fleet.learned,
    pausedUntil: fleet.pauseUntil,
    probeWon,
    replicas,
    intervalMs,
    leaseUntil: expiresAt,
    repaired: 0,
  };
}

/** What the provider accepted from the fleet, calls per second: the replicas' reports summed, and a bound above. */
interface FleetAccepted {
  readonly reported: number;
  readonly bound: number;
}

function applyEvent(fleet: FleetRecord, request: ExchangeRequest, accepted: FleetAccepted): boolean {
  const { event, now } = request;
  if (event.kind === 'decrease' && now - fleet.lastDecrease >= DECREASE_COOLDOWN_MS) {
    // What the fleet drew when the provider began refusing: the rate it was allowed, or what the provider accepted
    // when that is less (a fleet whose calls lag a climbing rate was allowed more than it sent: 0.85 x an allowed
    // 35.5/s learned 30.2/s at a limit of 30/s), within READING_FLOOR of the allowed rate. With no rate yet (no
    // budget, nothing learned), what the provider accepted meanwhile is the only reading of its limit.
    const current = effective(request.configuredRate, fleet.learned);
    const drew =
      current === undefined
        ? accepted.bound
        : Math.min(current, Math.max(accepted.reported, READING_FLOOR * current));
    if (drew > 0) {
      fleet.learned = Math.max(MIN_LEARNED_RATE, drew * DECREASE_FACTOR);
      // A reading of what was accepted is no ceiling (it may be taken over too short a time): the rate climbs on
      // until the next 429, whose allowed rate is one.
      // So is a 429 soon after the last decrease (calls sent before the fleet heard of it).
      // The ceiling is the lower of the rate the fleet was allowed and what the provider accepted (measured over a
      // second or more): a fleet still climbing when the 429 came was allowed more than the provider's limit, and a
      // ceiling of 0.9 x that allowed rate could sit above the limit (measured: 30.9/s learned at a limit of 30/s).
      // What was accepted is the replicas' reports summed, never the bound above them (one replica drawing more than
      // its even share lifts that bound above what the fleet sent).
      const settled = current !== undefined && now - fleet.lastDecrease >= CEILING_SETTLE_MS;
      fleet.ceiling = settled ? ceilingOf(current, accepted.reported) : undefined;
      fleet.ceilingAt = now;
      fleet.lastDecrease = now;
      fleet.raisedAt = now;
    }
  } else if (event.kind === 'pause') {
    fleet.pauseUntil = Math.max(fleet.pauseUntil, Math.min(event.until, now + request.maxPauseMs));
    fleet.probeOwner = undefined;
    fleet.probeUntil = 0;
  } else if (event.kind === 'resume') {
    if (fleet.pauseUntil <= now) fleet.pauseUntil = 0;
    fleet.probeOwner = undefined;
    fleet.probeUntil = 0;
  } else if (event.kind === 'probe') {
    if (fleet.pauseUntil > 0 && now >= fleet.pauseUntil && fleet.probeUntil <= now) {
      fleet.probeOwner = request.replicaId;
      fleet.probeUntil = now + event.leaseMs;
      return true;
    }
  }
  return false;
}

/**
 * The ceiling a settled 429 teaches: the allowed rate with no reading, the reading when lower; none from a reading
 * under READING_FLOOR of the allowed rate (a mostly idle interval's, no measure of the limit: the rate climbs on).
 */
function ceilingOf(allowed: number, reported: number): number | undefined {
  if (reported <= 0) return allowed;
  if (reported < READING_FLOOR * allowed) return undefined;
  return Math.min(allowed, reported);
}

/** While calls succeed (a second after the last decrease), the learned rate climbs toward its cap. */
function raiseAdditively(fleet: FleetRecord, request: ExchangeRequest): void {
  const { now } = request;
  if (fleet.learned === undefined || now - fleet.lastDecrease < DECREASE_COOLDOWN_MS || now <= fleet.raisedAt)
    return;
  let cap = request.configuredRate ?? Number.POSITIVE_INFINITY;
  const ceilingKnown = fleet.ceiling !== undefined && now - fleet.ceilingAt < CEILING_MEMORY_MS;
  if (ceilingKnown) cap = Math.min(cap, (fleet.ceiling as number) * CEILING_MARGIN);
  const step = Math.max(
    MIN_STEP,
    INCREASE_PER_SECOND * (ceilingKnown ? (fleet.ceiling as number) : fleet.learned),
  );
  if (fleet.learned < cap)
    fleet.learned = Math.min(cap, fleet.learned + (step * (now - fleet.raisedAt)) / 1000);
  fleet.raisedAt = now;
  if (request.configuredRate !== undefined && fleet.learned >= request.configuredRate) {
    fleet.learned = undefined;
    fleet.ceiling = undefined;
  }
}

function effective(configured: number | undefined, learned: number | undefined): number | undefined {
  if (learned === undefined) return configured;
  return configured === undefined ? learned : Math.min(configured, learned);
}

/**
 * This replica's rates. The fleet's rate goes first to critical demand, then standard (at most its share), then
 * sheddable (at most its share): sheddable is cut first. Each replica gets its part of each priority's total in
 * proportion to its demand, plus half of an even split of what nobody asked for (the other half stays free for a
 * replica whose demand grows before its next exchange). It never gets more than the others left free, so the
 * replicas' allocations never add up to more than the rate.
 */
export function allocate(
  rate: number,
  request: Pick<ExchangeRequest, 'shares' | 'demand'>,
  others: { readonly demand: PriorityRates; readonly allocation: PriorityRates },
  replicas: number,
  /** Keep half of the spare free for the others (false: this replica is on its own, e.g. Redis down). */
  keepSpareFree = true,
): PriorityRates {
  return allocateWanted(rate, request, others, replicas, keepSpareFree).grant;
}

/** allocate(), and how much of critical and standard it wanted beyond what the others left free (`short`). */
function allocateWanted(
  rate: number,
  request: Pick<ExchangeRequest, 'shares' | 'demand'>,
  others: { readonly demand: PriorityRates; readonly allocation: PriorityRates },
  replicas: number,
  /** Keep half of the spare free for the others (false: this replica is on its own, e.g. Redis down). */
  keepSpareFree = true,
): { grant: PriorityRates; short: number } {
  const { shares, demand } = request;
  const total = {
    critical: others.demand.critical + demand.critical,
    standard: others.demand.standard + demand.standard,
    sheddable: others.demand.sheddable + demand.sheddable,
  };
  const fleetCritical = Math.min(total.critical, shares.critical * rate);
  const fleetStandard = Math.min(total.standard, shares.standard * rate, rate - fleetCritical);
  const fleetSheddable = Math.min(
    total.sheddable,
    shares.sheddable * rate,
    Math.max(0, rate - fleetCritical - fleetStandard),
  );
  const spare = Math.max(0, rate - fleetCritical - fleetStandard - fleetSheddable);
  const headroom = keepSpareFree ? spare / (2 * replicas) : spare;
  const weight = demand.critical + demand.standard + demand.sheddable + 3;
  const part = (fleet: number, mine: number, all: number) => (all > 0 ? (fleet * mine) / all : 0);
  const wanted = {
    critical:
      part(fleetCritical, demand.critical, total.critical) + (headroom * (demand.critical + 1)) / weight,
    standard:
      part(fleetStandard, demand.standard, total.standard) +
      Math.min(
        (headroom * (demand.standard + 1)) / weight,
        Math.max(0, shares.standard * rate - fleetStandard) / replicas,
      ),
    sheddable:
      part(fleetSheddable, demand.sheddable, total.sheddable) +
      Math.min(
        (headroom * (demand.sheddable + 1)) / weight,
        Math.max(0, shares.sheddable * rate - fleetSheddable) / replicas,
      ),
  };
  let free = Math.max(
    0,
    rate - others.allocation.critical - others.allocation.standard - others.allocation.sheddable,
  );
  const critical = Math.min(wanted.critical, free);
  free -= critical;
  const standard = Math.min(
    wanted.standard,
    free,
    Math.max(0, shares.standard * rate - others.allocation.standard),
  );
  free -= standard;
  const sheddable = Math.min(
    wanted.sheddable,
    free,
    Math.max(0, shares.sheddable * rate - others.allocation.sheddable),
  );
  const short = wanted.critical - critical + (wanted.standard - standard);
  return { grant: { critical, standard, sheddable }, short };
}

function addInto(target: PriorityRates, add: PriorityRates): void {
  target.critical += add.critical;
  target.standard += add.standard;
  target.sheddable += add.sheddable;
}

function sum(rates: PriorityRates): number {
  return rates.critical + rates.standard + rates.sheddable;
}
