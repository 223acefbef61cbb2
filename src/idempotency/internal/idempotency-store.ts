// Where Idempotency-Key records live: the shared Redis (one SET NX PX to claim) or, in local mode, this process.
import { createExpiringMap } from '../../store/expiring-map';
import type { RedisClient } from '../../store/redis-connection';
import { readString } from '../../store/wrong-type';

/** What claiming a key found: it is ours now, or the record already there (undefined: gone in between). */
export type ClaimResult =
  | { readonly claimed: true }
  | { readonly claimed: false; readonly existing?: string };

/** The narrow seam to the store; every call may throw when the store cannot be reached. */
export interface IdempotencyStore {
  /** SET NX PX: the record is written only when the key holds none; otherwise the one there is read (2 commands). */
  claim(key: string, record: string, ttlMs: number): Promise<ClaimResult>;
  /** Replaces the claim with the answer kept (1 command). */
  keep(key: string, record: string, ttlMs: number): Promise<void>;
  /** Drops the claim: nothing was sent, a retry may be forwarded (1 command). */
  release(key: string): Promise<void>;
}

export function redisIdempotencyStore(redis: RedisClient): IdempotencyStore {
  return {
    async claim(key, record, ttlMs) {
      const set = await redis.set(key, record, 'PX', ttlMs, 'NX');
      if (set === 'OK') return { claimed: true };
      // A key of another type reads as a value no seal opens: ignored like any unreadable record.
      return { claimed: false, existing: await readString(redis, key) };
    },
    async keep(key, record, ttlMs) {
      await redis.set(key, record, 'PX', ttlMs);
    },
    async release(key) {
      await redis.del(key);
    },
  };
}

/** Local mode (or one replica without Redis): the same records in this process, bounded. */
export function memoryIdempotencyStore(now: () => number = Date.now, maxEntries = 100_000): IdempotencyStore {
  const entries = createExpiringMap<string>(now);
  return {
    async claim(key, record, ttlMs) {
      const existing = entries.get(key);
      if (existing !== undefined) return { claimed: false, existing };
      // Bounded like the answer cache: keys are caller-chosen. Dropping records forgets keys (a later repeat would be
      // forwarded again): a ceiling only a flood reaches, in a mode that serves one process.
      if (entries.size >= maxEntries) entries.clear();
      entries.set(key, record, ttlMs);
      return { claimed: true };
    },
    async keep(key, record, ttlMs) {
      entries.set(key, record, ttlMs);
    },
    async release(key) {
      entries.delete(key);
    },
  };
}
