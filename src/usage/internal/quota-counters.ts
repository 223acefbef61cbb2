// Where the fleet's quota counters live: Redis (shared by every replica) or memory (local mode, one process).
// A counter holds the units the fleet has claimed in a period; a claim never takes it past its limit.
import type { RedisClient } from '../../store/redis-connection';

export interface QuotaClaim {
  readonly key: string;
  /** Units wanted; granted as many as fit under `limit`. */
  readonly want: number;
  readonly limit: number;
  /** Units already spent without Redis (an outage) that must be added whatever the limit. */
  readonly unsynced: number;
  /** The counter's expiry (ms since the epoch), set when the counter is new. */
  readonly expireAt: number;
  /**
   * Units this replica knows the fleet used in the period (0: none known, or none of its own committed). A counter
   * found missing while this is above 0 was lost (a Redis restart without persistence, an eviction): it starts again
   * from this floor instead of 0, and the grant says so.
   */
  readonly floor?: number;
}

export interface QuotaGrant {
  readonly granted: number;
  /** The fleet's claimed units after this claim. */
  readonly total: number;
  /** Replicas that claimed for this client and account within the window (this one included), when asked. */
  readonly replicas?: number;
  /** The counter was missing mid-period (lost) and was started again from the claim's floor. */
  readonly lost?: boolean;
}

/** Who claims: the replica notes itself among the client and account's replicas, and learns how many there are. */
export interface ClaimingReplica {
  readonly key: string;
  readonly replicaId: string;
  readonly now: number;
  /** Replicas whose last claim is older than this are no longer counted (and are forgotten). */
  readonly windowMs: number;
}

export interface QuotaCounters {
  /** Claims every key at once (one round trip); the grants in the order of `claims`. */
  claim(claims: readonly QuotaClaim[], replica?: ClaimingReplica): Promise<QuotaGrant[]>;
  /** Gives unused units back (graceful stop). */
  giveBack(returns: readonly { key: string; units: number }[]): Promise<void>;
}

/**
 * One script for all keys of a claim: atomic, so two replicas near the limit never both see room that only one
 * has. Steady state costs EVALSHA + one INCRBY per key; DECRBY only when the limit cuts a claim, PEXPIREAT only
 * when the counter is new. A key holding something that is not a counter is replaced (never a stuck quota). With a
 * claiming replica (ARGV[1]: its id), the last key is the hash of the client and account's replicas: HSET, HGETALL,
 * PEXPIRE (and HDEL of replicas gone quiet): how many replicas share the quota, for an outage's share.
 */
const CLAIM_SCRIPT = `
local out = {}
local counters = #KEYS
local replicas = nil
if ARGV[1] ~= '' then
  counters = counters - 1
  local seen = KEYS[#KEYS]
  local now = tonumber(ARGV[2])
  local window = tonumber(ARGV[3])
  redis.call('HSET', seen, ARGV[1], now)
  replicas = 0
  local all = redis.call('HGETALL', seen)
  for j = 1, #all, 2 do
    local at = tonumber(all[j + 1])
    if at and at >= now - window then
      replicas = replicas + 1
    else
      redis.call('HDEL', seen, all[j])
    end
  end
  redis.call('PEXPIRE', seen, window)
end
for i = 1, counters do
  local key = KEYS[i]
  local base = 3 + (i - 1) * 5
  local want = tonumber(ARGV[base + 1])
  local limit = tonumber(ARGV[base + 2])
  local unsynced = tonumber(ARGV[base + 3])
  local expireAt = ARGV[base + 4]
  local floor = tonumber(ARGV[base + 5])
  local lost = 0
  local total = redis.pcall('INCRBY', key, want + unsynced)
  if type(total) ~= 'number' then
    -- Spoiled (not a number, another type): as lost as a missing counter, restarted from the floor too.
    total = want + unsynced
    if floor > 0 then
      total = total + floor
      lost = 1
    end
    redis.call('SET', key, total, 'PXAT', expireAt)
  elseif total == want + unsynced then
    redis.call('PEXPIREAT', key, expireAt)
    if floor > 0 then
      total = redis.call('INCRBY', key, floor)
      lost = 1
    end
  end
  local before = total - want
  local granted = math.max(0, math.min(want, limit - before))
  if granted < want then
    total = redis.call('DECRBY', key, want - granted)
  end
  out[i] = {granted, total, lost, replicas}
end
return out`;

/**
 * Units given back (a graceful stop, a reload): only to a counter Redis still holds, and never below 0. A plain DECRBY
 * on a counter Redis lost (a restart without persistence, an eviction) made a negative one without expiry: kept
 * forever, and granting the lost units again on top of the limit.
 */
const GIVE_BACK_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local total = redis.call('DECRBY', KEYS[1], ARGV[1])
if total < 0 then total = redis.call('INCRBY', KEYS[1], -total) end
return total`;

export function redisQuotaCounters(redis: RedisClient): QuotaCounters {
  redis.defineCommand('usageQuotaClaim', { lua: CLAIM_SCRIPT });
  redis.defineCommand('usageQuotaGiveBack', { numberOfKeys: 1, lua: GIVE_BACK_SCRIPT });
  const commands = redis as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const run = commands.usageQuotaClaim as
    | ((...args: unknown[]) => Promise<[number, number, number, number?][]>)
    | undefined;
  const giveBack = commands.usageQuotaGiveBack;
  return {
    async claim(claims, replica) {
      const keys = claims.map((c) => c.key);
      if (replica) keys.push(replica.key);
      const args: (string | number)[] = [keys.length, ...keys];
      if (replica) args.push(replica.replicaId, Math.round(replica.now), replica.windowMs);
      else args.push('', 0, 0);
      for (const c of claims)
        args.push(c.want, c.limit, c.unsynced, Math.round(c.expireAt), Math.max(0, Math.floor(c.floor ?? 0)));
      const reply = (await run?.apply(redis, args)) ?? [];
      return reply.map(([granted, total, lost, replicas]) => ({
        granted: Number(granted),
        total: Number(total),
        ...(Number(lost) === 1 && { lost: true }),
        ...(replicas !== undefined && { replicas: Number(replicas) }),
      }));
    },
    async giveBack(returns) {
      await Promise.all(returns.map((r) => giveBack?.call(redis, r.key, r.units)));
    },
  };
}

/** Local mode: the same arithmetic in one process. */
export function memoryQuotaCounters(now: () => number = Date.now): QuotaCounters {
  const counters = new Map<string, { total: number; expireAt: number }>();
  const seen = new Map<string, Map<string, number>>();
  const replicasOf = (replica: ClaimingReplica): number => {
    let claimed = seen.get(replica.key);
    if (!claimed) {
      claimed = new Map();
      seen.set(replica.key, claimed);
    }
    claimed.set(replica.replicaId, replica.now);
    for (const [id, at] of claimed) if (at < replica.now - replica.windowMs) claimed.delete(id);
    return claimed.size;
  };
  return {
    async claim(claims, replica) {
      const replicas = replica ? replicasOf(replica) : undefined;
      return claims.map((c) => {
        let counter = counters.get(c.key);
        if (!counter || now() >= counter.expireAt) {
          counter = { total: 0, expireAt: c.expireAt };
          counters.set(c.key, counter);
        }
        counter.total += c.unsynced;
        const granted = Math.max(0, Math.min(c.want, c.limit - counter.total));
        counter.total += granted;
        return { granted, total: counter.total, ...(replicas !== undefined && { replicas }) };
      });
    },
    async giveBack(returns) {
      for (const r of returns) {
        const counter = counters.get(r.key);
        if (counter) counter.total = Math.max(0, counter.total - r.units);
      }
    },
  };
}
