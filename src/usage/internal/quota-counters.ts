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
}

export interface QuotaGrant {
  readonly granted: number;
  /** The fleet's claimed units after this claim. */
  readonly total: number;
}

export interface QuotaCounters {
  /** Claims every key at once (one round trip); the grants in the order of `claims`. */
  claim(claims: readonly QuotaClaim[]): Promise<QuotaGrant[]>;
  /** Gives unused units back (graceful stop). */
  giveBack(returns: readonly { key: string; units: number }[]): Promise<void>;
}

/**
 * One script for all keys of a claim: atomic, so two replicas near the limit never both see room that only one
 * has. Steady state costs EVALSHA + one INCRBY per key; DECRBY only when the limit cuts a claim, PEXPIREAT only
 * when the counter is new. A key holding something that is not a counter is replaced (never a stuck quota).
 */
const CLAIM_SCRIPT = `
local out = {}
for i, key in ipairs(KEYS) do
  local base = (i - 1) * 4
  local want = tonumber(ARGV[base + 1])
  local limit = tonumber(ARGV[base + 2])
  local unsynced = tonumber(ARGV[base + 3])
  local expireAt = ARGV[base + 4]
  local total = redis.pcall('INCRBY', key, want + unsynced)
  if type(total) ~= 'number' then
    redis.call('SET', key, want + unsynced, 'PXAT', expireAt)
    total = want + unsynced
  elseif total == want + unsynced then
    redis.call('PEXPIREAT', key, expireAt)
  end
  local before = total - want
  local granted = math.max(0, math.min(want, limit - before))
  if granted < want then
    total = redis.call('DECRBY', key, want - granted)
  end
  out[i] = {granted, total}
end
return out`;

export function redisQuotaCounters(redis: RedisClient): QuotaCounters {
  redis.defineCommand('usageQuotaClaim', { lua: CLAIM_SCRIPT });
  const run = (redis as unknown as Record<string, (...args: unknown[]) => Promise<[number, number][]>>)
    .usageQuotaClaim;
  return {
    async claim(claims) {
      const args: (string | number)[] = [claims.length, ...claims.map((c) => c.key)];
      for (const c of claims) args.push(c.want, c.limit, c.unsynced, Math.round(c.expireAt));
      const reply = (await run?.apply(redis, args)) ?? [];
      return reply.map(([granted, total]) => ({ granted: Number(granted), total: Number(total) }));
    },
    async giveBack(returns) {
      await Promise.all(returns.map((r) => redis.decrby(r.key, r.units)));
    },
  };
}

/** Local mode: the same arithmetic in one process. */
export function memoryQuotaCounters(now: () => number = Date.now): QuotaCounters {
  const counters = new Map<string, { total: number; expireAt: number }>();
  return {
    async claim(claims) {
      return claims.map((c) => {
        let counter = counters.get(c.key);
        if (!counter || now() >= counter.expireAt) {
          counter = { total: 0, expireAt: c.expireAt };
          counters.set(c.key, counter);
        }
        counter.total += c.unsynced;
        const granted = Math.max(0, Math.min(c.want, c.limit - counter.total));
        counter.total += granted;
        return { granted, total: counter.total };
      });
    },
    async giveBack(returns) {
      for (const r of returns) {
        const counter = counters.get(r.key);
        if (counter) counter.total -= r.units;
      }
    },
  };
}
