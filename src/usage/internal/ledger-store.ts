// Where ledger days are kept: one Redis hash per UTC day (a field per replica start holding its whole count of the
// day), or memory in local mode. One HSET per flush, whatever the number of rows: the Redis economy of the ledger.
// Beside the days, the store's marker: since when it holds the ledger, and when a replica found it reset.
import type { RedisClient } from '../../store/redis-connection';

/** The store's own record of its history (a hash without expiry, beside the days). */
export interface StoreMarker {
  /** ISO instant of the first ledger write this store holds (set once: HSETNX). */
  readonly since?: string;
  /** ISO instant at which a replica found its own, earlier written count missing: the store lost what it held. */
  readonly resetAt?: string;
}

export interface LedgerStore {
  /**
   * Replaces this replica's count of the day; sets the day's expiry when `expireAt` is given (its first write).
   * Resolves true when the field was new: for a field this replica wrote before, the store lost it.
   */
  write(day: string, replicaId: string, snapshot: string, expireAt?: number): Promise<boolean>;
  /** Every replica's count of the day (JSON snapshots), by replica. */
  read(day: string): Promise<Record<string, string>>;
  /** Notes that the store holds the ledger since `at` (only the first note stays). */
  noteSince(at: number): Promise<void>;
  /** A replica found the store reset at `at`: noted in the marker, and the day's lost expiry set again. */
  noteReset(at: number, day: string, expireAt: number): Promise<void>;
  readMarker(): Promise<StoreMarker>;
}

export function redisLedgerStore(
  redis: RedisClient,
  dayKey: (day: string) => string,
  markerKey: string,
): LedgerStore {
  return {
    async write(day, replicaId, snapshot, expireAt) {
      const key = dayKey(day);
      if (expireAt === undefined) return (await redis.hset(key, replicaId, snapshot)) === 1;
      // A pipeline, not MULTI: two commands once a day, and a lost expiry is set again after a restart.
      const results = await redis.pipeline().hset(key, replicaId, snapshot).pexpireat(key, expireAt).exec();
      const failed = results?.find(([error]) => error);
      if (!results || failed) throw failed?.[0] ?? new Error('the ledger write was discarded');
      return results[0]?.[1] === 1;
    },
    async read(day) {
      return redis.hgetall(dayKey(day));
    },
    async noteSince(at) {
      await redis.hsetnx(markerKey, 'since', new Date(at).toISOString());
    },
    async noteReset(at, day, expireAt) {
      // Separate commands: the marker and the day keys are in different Cluster slots.
      const instant = new Date(at).toISOString();
      await Promise.all([
        redis.hset(markerKey, 'resetAt', instant),
        redis.hsetnx(markerKey, 'since', instant),
        redis.pexpireat(dayKey(day), expireAt),
      ]);
    },
    async readMarker() {
      // Anyone with access to Redis may have written that key: only the instants the gateway writes are believed.
      const fields = await redis.hgetall(markerKey).catch((error: Error) => {
        if (/WRONGTYPE/.test(error.message)) return {} as Record<string, string>;
        throw error;
      });
      return {
        ...(isInstant(fields.since) && { since: fields.since }),
        ...(isInstant(fields.resetAt) && { resetAt: fields.resetAt }),
      };
    },
  };
}

/** An ISO instant as `Date.prototype.toISOString` writes it (what noteSince and noteReset store). */
function isInstant(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const ms = Date.parse(value);
  return Number.isFinite(ms) && new Date(ms).toISOString() === value;
}

export function memoryLedgerStore(): LedgerStore {
  const days = new Map<string, Map<string, string>>();
  let marker: StoreMarker = {};
  return {
    async write(day, replicaId, snapshot) {
      let replicas = days.get(day);
      if (!replicas) {
        replicas = new Map();
        days.set(day, replicas);
      }
      const created = !replicas.has(replicaId);
      replicas.set(replicaId, snapshot);
      return created;
    },
    async read(day) {
      return Object.fromEntries(days.get(day) ?? []);
    },
    async noteSince(at) {
      marker = { since: new Date(at).toISOString(), ...marker };
    },
    async noteReset(at) {
      const instant = new Date(at).toISOString();
      marker = { since: instant, ...marker, resetAt: instant };
    },
    async readMarker() {
      return marker;
    },
  };
}
