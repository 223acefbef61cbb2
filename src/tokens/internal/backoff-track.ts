// One exponential back-off with jitter whose state the fleet shares as a record: since when, how long, how many.

/** A failure as the fleet shares it: no secret in it, and never trusted beyond the policy when read back. */
export interface BackoffRecord {
  /** The GatewayError reason the failure gave. */
  readonly reason: string;
  /** Epoch milliseconds of the failed call. */
  readonly at: number;
  /** The wait chosen by the replica that failed (jitter included). */
  readonly waitMs: number;
  /** Failures in a row: the exponent of the next wait. */
  readonly streak: number;
  /** Fingerprint of the credentials that were refused (refusals only): other credentials start clean. */
  readonly credentials?: string;
  /**
   * The provider refused tokens it had just issued (logins succeed, calls get 401): the streak survives successful
   * logins and ends only when the provider accepts a call.
   */
  readonly tokenRejected?: boolean;
}

export interface BackoffPolicy {
  /** The first wait. 0 disables the back-off. */
  readonly minMs: number;
  /** The wait never grows past this. */
  readonly maxMs: number;
  /** The most a record may ask for (a Retry-After may exceed maxMs up to this). */
  readonly ceilingMs: number;
}

/** Each wait is stretched by up to this fraction (capped at maxMs), so fleets sharing an account drift apart. */
const JITTER = 0.25;
/** A streak longer than this gains nothing (the wait is long capped) and a forged one is bounded. */
const MAX_STREAK = 64;

/** The wait after `streak` failures in a row: minMs·2^(streak−1), jittered upwards, capped at maxMs. */
export function nextWaitMs(policy: BackoffPolicy, streak: number, random: () => number): number {
  if (policy.minMs <= 0) return 0;
  const nominal = Math.min(policy.maxMs, policy.minMs * 2 ** Math.min(streak - 1, MAX_STREAK));
  return Math.min(policy.maxMs, Math.round(nominal * (1 + JITTER * random())));
}

export class BackoffTrack {
  /** The latest failure known here (own or shared), with `at` already made trustworthy. */
  private known?: BackoffRecord;
  /** A future-dated record seen before, and when: it counts from that moment once, never from each re-read. */
  private future?: { readonly at: number; readonly seenAt: number };

  constructor(
    private readonly policy: BackoffPolicy,
    private readonly now: () => number,
    private readonly random: () => number,
  ) {}

  get current(): BackoffRecord | undefined {
    return this.known;
  }

  /** Milliseconds before the next attempt (0 when it may go). */
  remaining(): number {
    const known = this.known;
    return known ? Math.max(0, known.at + known.waitMs - this.now()) : 0;
  }

  /** A failure this replica saw: the next step of the streak; `floorMs` (a Retry-After) lengthens the wait. */
  failed(reason: string, credentials?: string, floorMs = 0, tokenRejected = false): BackoffRecord {
    const streak = Math.min(MAX_STREAK, (this.known?.streak ?? 0) + 1);
    const waitMs = Math.max(
      nextWaitMs(this.policy, streak, this.random),
      Math.min(floorMs, this.policy.ceilingMs),
    );
    const record: BackoffRecord = {
      reason,
      at: this.now(),
      waitMs,
      streak,
      credentials,
      ...(tokenRejected && { tokenRejected }),
    };
    this.known = record;
    return record;
  }

  /**
   * Takes in a record read from the store. A time in the future counts as now (so a forged far-future record
   * blocks for one wait at most), the wait is capped by the policy, and the later end and longer streak win.
   */
  observe(shared: BackoffRecord | undefined): void {
    if (!shared) return;
    const now = this.now();
    let at = shared.at;
    if (at > now) {
      if (this.future?.at !== at) this.future = { at, seenAt: now };
      at = this.future.seenAt;
    }
    const waitMs = Math.min(Math.max(0, shared.waitMs), this.policy.ceilingMs);
    const streak = Math.min(MAX_STREAK, Math.max(1, Math.floor(shared.streak)));
    const read: BackoffRecord = { ...shared, at, waitMs, streak };
    const known = this.known;
    if (!known) {
      this.known = read;
      return;
    }
    const later = read.at + read.waitMs > known.at + known.waitMs ? read : known;
    this.known = { ...later, streak: Math.max(read.streak, known.streak) };
  }

  clear(): void {
    this.known = undefined;
    this.future = undefined;
  }
}
