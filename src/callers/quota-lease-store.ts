// An express-rate-limit store whose counters live in Redis, shared by every replica, claimed in leases so that a
// busy client costs one Redis round trip per lease rather than one per request.
import type { ClientRateLimitInfo, IncrementResponse, Options, Store } from 'express-rate-limit';
import type { RedisClient } from '../store/redis-connection';

/**
 * Claims `ARGV[1]` hits of the window counter at once and returns the counter after the claim and the window's
 * remaining time. A fixed window: it starts with the first claim and the counter expires with it.
 *
 * Whatever else holds the key is not a counter of this window (written by hand or by whoever can write Redis): no
 * expiry, a window longer than `ARGV[2]` ms, a count below zero, not a count or not a string. It is replaced by a
 * fresh window, so such a record never locks a client out for longer than one window, and never fails the claim
 * (a failed claim would send every limiter of the replica to memory, as if Redis were down).
 */
const CLAIM_SCRIPT = `
local claim = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local total = redis.pcall('INCRBY', KEYS[1], claim)
local ttl = redis.call('PTTL', KEYS[1])
if type(total) ~= 'number' or total < claim or ttl <= 0 or ttl > window then
  redis.call('SET', KEYS[1], claim, 'PX', window)
  return {claim, window}
end
return {total, ttl}`;

/** A lease is at most this share of what the fleet has left in the window, so little can sit unused in a replica. */
const LEASE_SHARE_OF_REMAINING = 1 / 100;
/**
 * And at most this many hits: one Redis round trip (three commands) per this many requests of a busy client. 1,000
 * keeps the rate limit at 3 commands per 1,000 requests, leaving room in the fleet's budget of 15 for the provider
 * budget, quotas and the usage ledger; the 1 % share above still bounds what can sit unused for a smaller limit.
 */
export const MAX_LEASE = 1_000;
/** Leases of ended windows are swept once the map holds this many keys, and again each time it doubles. */
const SWEEP_AT = 10_000;
/** Past this many keys (a flood from many addresses), the oldest leases are forgotten; Redis keeps their counts. */
export const MAX_LEASES = 100_000;

/**
 * The hits this replica may hand out for one key: hit numbers `next + 1 … end` of the fleet's window counter are
 * its own (claimed in Redis), each given to exactly one request. `end` is also the fleet's count at the last claim.
 */
interface Lease {
  next: number;
  end: number;
  windowEndsAt: number;
  /** The claim in flight for this key: requests that find the lease empty wait for it together. */
  claim?: Promise<void>;
  waiting: number;
}

export interface QuotaLeaseStoreOptions {
  readonly redis: RedisClient;
  /** Counters live under `<prefix><key>`. */
  readonly prefix: string;
  /** The limit of every key of this store (one store per limit and window). */
  readonly limit: number;
  readonly now?: () => number;
}

/**
 * Exact for the fleet: every hit number is claimed in Redis once and given to one request, so the fleet never admits
 * more than the limit, and a request is refused only when its hit number is past the limit. Leases are sized from
 * what the fleet has left (at most 1 % of it and {@link MAX_LEASE}), so a client far from its limit costs one Redis
 * call per lease, and a client near it (or with a small limit) one call per request, as an unleased store would.
 * The price: hits leased to one replica and not yet used are not available to the others, so near the end of its
 * budget a client may be refused on one replica while another still admits a few (at most one lease each).
 * Once the fleet's count has reached the limit, the rest of the window is refused without asking Redis.
 */
export class QuotaLeaseStore implements Store {
  private readonly leases = new Map<string, Lease>();
  private sweepAt = SWEEP_AT;
  private windowMs = 60_000;
  private readonly now: () => number;

  constructor(private readonly options: QuotaLeaseStoreOptions) {
    this.now = options.now ?? Date.now;
  }

  init(options: Options): void {
    this.windowMs = options.windowMs;
  }

  increment(key: string): IncrementResponse | Promise<IncrementResponse> {
    const lease = this.leases.get(key);
    if (lease && lease.next < lease.end && this.now() < lease.windowEndsAt) return this.take(lease);
    return this.incrementAfterClaim(key);
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const lease = this.leases.get(key);
    if (lease && this.now() < lease.windowEndsAt)
      return { totalHits: lease.next, resetTime: new Date(lease.windowEndsAt) };
    return undefined;
  }

  /** Gives one hit back to the fleet (express-rate-limit's skip options); the lease is left as it is. */
  async decrement(key: string): Promise<void> {
    await this.options.redis.decr(this.options.prefix + key);
  }

  async resetKey(key: string): Promise<void> {
    this.leases.delete(key);
    await this.options.redis.del(this.options.prefix + key);
  }

  private take(lease: Lease): IncrementResponse {
    lease.next += 1;
    return { totalHits: lease.next, resetTime: new Date(lease.windowEndsAt) };
  }

  private async incrementAfterClaim(key: string): Promise<IncrementResponse> {
    for (;;) {
      const lease = this.currentLease(key);
      if (lease.next < lease.end) return this.take(lease);
      // The fleet's count reached the limit in this window: nothing can be admitted until it ends.
      if (lease.end >= this.options.limit)
        return { totalHits: lease.end + 1, resetTime: new Date(lease.windowEndsAt) };
      lease.waiting += 1;
      try {
        lease.claim ??= this.claim(key, lease).finally(() => {
          lease.claim = undefined;
        });
        await lease.claim;
      } finally {
        lease.waiting -= 1;
      }
    }
  }

  /** This window's lease of `key`, a fresh empty one when the last one's window has ended. */
  private currentLease(key: string): Lease {
    const now = this.now();
    const lease = this.leases.get(key);
    if (lease && now < lease.windowEndsAt) return lease;
    if (lease?.claim) return lease; // a claim in flight will set the new window
    if (this.leases.size >= this.sweepAt) this.sweep(now);
    const fresh: Lease = { next: 0, end: 0, windowEndsAt: Number.POSITIVE_INFINITY, waiting: 0 };
    this.leases.set(key, fresh);
    return fresh;
  }

  private async claim(key: string, lease: Lease): Promise<void> {
    const size = this.leaseSize(lease);
    const reply = (await this.options.redis.eval(
      CLAIM_SCRIPT,
      1,
      this.options.prefix + key,
      size,
      this.windowMs,
    )) as [number, number];
    const [total, ttlMs] = reply;
    lease.next = total - size;
    lease.end = total;
    lease.windowEndsAt = this.now() + Number(ttlMs);
  }

  /**
   * One hit when nothing is known of the window yet (its first claim here, or a small limit); else a share of what
   * the fleet had left at the last claim; and never fewer than the requests already waiting, up to what is left.
   */
  private leaseSize(lease: Lease): number {
    const remaining = this.options.limit - lease.end;
    const known = Number.isFinite(lease.windowEndsAt) && lease.end > 0;
    const share = known ? Math.floor(remaining * LEASE_SHARE_OF_REMAINING) : 1;
    const forWaiting = Math.min(lease.waiting, remaining);
    return Math.max(1, Math.min(MAX_LEASE, Math.max(share, forWaiting)));
  }

  /** Amortized: the next sweep waits until the map has doubled, so a flood of new keys costs O(1) each. */
  private sweep(now: number): void {
    for (const [key, lease] of this.leases)
      if (now >= lease.windowEndsAt && !lease.claim) this.leases.delete(key);
    // A forgotten lease loses only its unused hits (counted in Redis as taken); its key claims afresh next time.
    if (this.leases.size >= MAX_LEASES)
      for (const [key, lease] of this.leases) {
        if (this.leases.size < MAX_LEASES / 2) break;
        if (!lease.claim) this.leases.delete(key);
      }
    this.sweepAt = Math.min(MAX_LEASES, Math.max(SWEEP_AT, 2 * this.leases.size));
  }
}
