// Where ledger days are kept: one Redis hash per UTC day (a field per replica start holding its whole count of the
// day), or memory in local mode. One HSET per flush, whatever the number of rows: the Redis economy of the ledger.
import type { RedisClient } from '../../store/redis-connection';

export interface LedgerStore {
  /** Replaces this replica's count of the day; sets the day's expiry when `expireAt` is given (its first write). */
  write(day: string, replicaId: string, snapshot: string, expireAt?: number): Promise<void>;
  /** Every replica's count of the day (JSON snapshots). */
  read(day: string): Promise<string[]>;
}

export function redisLedgerStore(redis: RedisClient, dayKey: (day: string) => string): LedgerStore {
  return {
    async write(day, replicaId, snapshot, expireAt) {
      const key = dayKey(day);
      if (expireAt === undefined) {
        await redis.hset(key, replicaId, snapshot);
        return;
      }
      // A pipeline, not MULTI: two commands once a day, and a lost expiry is set again after a restart.
      const results = await redis.pipeline().hset(key, replicaId, snapshot).pexpireat(key, expireAt).exec();
      const failed = results?.find(([error]) => error);
      if (!results || failed) throw failed?.[0] ?? new Error('the ledger write was discarded');
    },
    async read(day) {
      return Object.values(await redis.hgetall(dayKey(day)));
    },
  };
}

export function memoryLedgerStore(): LedgerStore {
  const days = new Map<string, Map<string, string>>();
  return {
    async write(day, replicaId, snapshot) {
      let replicas = days.get(day);
      if (!replicas) {
        replicas = new Map();
        days.set(day, replicas);
      }
      replicas.set(replicaId, snapshot);
    },
    async read(day) {
      return [...(days.get(day)?.values() ?? [])];
    },
  };
}
