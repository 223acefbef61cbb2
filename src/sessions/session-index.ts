// Which sessions belong to a provider session (sid) or a user (sub): sets shared by the fleet, for back-channel logout.
import type { RedisClient } from '../store/redis-connection';
import { isWrongType } from '../store/wrong-type';
import type { Clock } from '../tokens';

export interface SessionIndex {
  /** Adds `member` to the set under `key`, which lives at least `ttlMs` from now. */
  add(key: string, member: string, ttlMs: number): Promise<void>;
  members(key: string): Promise<string[]>;
  remove(key: string, ...members: string[]): Promise<void>;
}

/**
 * Deletes KEYS[1] unless it is a set, in one step: the key an `add` found of another type may have become another
 * replica's index since, and that index is kept.
 */
const DELETE_UNLESS_SET = `if redis.call('type', KEYS[1]).ok ~= 'set' then return redis.call('del', KEYS[1]) end
return 0`;

/**
 * A key of another type than a set under an index name (written by whoever can write Redis) is not the index: it
 * reads as empty and the next `add` replaces it, so it never fails a login or a back-channel logout as an outage.
 */
export function createRedisSessionIndex(client: RedisClient): SessionIndex {
  // The set outlives its longest member: PEXPIRE GT only ever extends it.
  const addOnce = (key: string, member: string, ttlMs: number) =>
    client
      .multi()
      .sadd(key, member)
      .pexpire(key, Math.ceil(ttlMs), 'GT')
      .pexpire(key, Math.ceil(ttlMs), 'NX')
      .exec();
  return {
    async add(key, member, ttlMs) {
      const [[failed] = [null]] = (await addOnce(key, member, ttlMs)) ?? [];
      if (!isWrongType(failed)) return;
      await client.eval(DELETE_UNLESS_SET, 1, key);
      await addOnce(key, member, ttlMs);
    },
    members: (key) => client.smembers(key).catch(emptyIfWrongType),
    async remove(key, ...members) {
      if (members.length > 0) await client.srem(key, ...members).catch(emptyIfWrongType);
    },
  };
}

/** Nothing of the index is under a key of another type; any other error (Redis failing) is thrown on. */
function emptyIfWrongType(error: unknown): string[] {
  if (isWrongType(error)) return [];
  throw error;
}

export function createMemorySessionIndex(clock: Pick<Clock, 'now'>): SessionIndex {
  const sets = new Map<string, { members: Set<string>; expiresAt: number }>();
  const live = (key: string) => {
    const set = sets.get(key);
    if (set && set.expiresAt <= clock.now()) sets.delete(key);
    return sets.get(key);
  };
  return {
    async add(key, member, ttlMs) {
      const set = live(key) ?? { members: new Set<string>(), expiresAt: 0 };
      set.members.add(member);
      set.expiresAt = Math.max(set.expiresAt, clock.now() + ttlMs);
      sets.set(key, set);
    },
    members: async (key) => [...(live(key)?.members ?? [])],
    async remove(key, ...members) {
      const set = live(key);
      for (const member of members) set?.members.delete(member);
    },
  };
}
