// The fleet-wide TokenStore on Redis (standalone, Sentinel or Cluster) through the one shared ioredis client.
import type { Logger } from 'pino';
import { MAX_TOKEN_LOCK_TTL_MS } from '../config/env-schema';
import type { ChannelListener, TokenStore } from '../tokens';
import type { RedisClient } from './redis-connection';
import { LUA_READ_HELD, readString } from './wrong-type';

/**
 * Deletes KEYS[1] only while it holds ARGV[1]: compare-before-delete for tokens and owner-checked unlock. A key of
 * another type compares as FOREIGN_VALUE, what `get` answered for it: a forged record read is deleted like any other.
 */
const COMPARE_AND_DELETE = `${LUA_READ_HELD}
if held == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/**
 * Takes the lock KEYS[1] for owner ARGV[1] with a lease of ARGV[2] ms when nobody holds it (SET NX PX), or when what
 * holds it is no replica's lock: no expiry, a lease longer than ARGV[3] ms (the longest lease a replica writes for
 * this key: see {@link takeoverAbove}), or not a string. Whoever can write Redis could otherwise park a lock there for ever, and every token flight of the
 * fleet would wait out TOKEN_LOCK_WAIT_MS rounds for twice the lease before fetching on its own.
 */
const ACQUIRE_LOCK = `
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 or ttl > tonumber(ARGV[3]) or redis.call('type', KEYS[1]).ok ~= 'string' then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;

/**
 * The longest lease a replica writes for a lock taken with `leaseMs`: the longest TOKEN_LOCK_TTL_MS allows (another
 * replica may run with a longer one), or `leaseMs` itself when longer. Marks held for longer than any token lock (a
 * logout token's jti, remembered for its whole validity) must stay exclusive for their whole lease: taking them
 * over would accept the replay they exist to refuse.
 */
function takeoverAbove(leaseMs: number): number {
  return Math.max(leaseMs, MAX_TOKEN_LOCK_TTL_MS);
}

/** Renews the lease of KEYS[1] only while ARGV[1] owns it. */
const COMPARE_AND_EXTEND = `${LUA_READ_HELD}
if held == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;

export interface RedisTokenStoreOptions {
  /** The shared client from createRedisClient (fail-fast: no offline queue, short command timeout). */
  readonly client: RedisClient;
  readonly logger: Logger;
}

/**
 * Keys of one token pair share a hash tag (`{token:<hash>}`), so the pair, its lock and its failure record live in
 * one Cluster slot and the Lua scripts touch a single slot. Pub/sub needs a connection of its own: it is a
 * duplicate of the shared client, opened on the first subscription.
 */
export function createRedisTokenStore({ client, logger }: RedisTokenStoreOptions): TokenStore {
  const channels = new Map<string, Set<ChannelListener>>();
  let subscriber: RedisClient | undefined;

  const openSubscriber = (): RedisClient => {
    if (subscriber) return subscriber;
    const connection = client.duplicate();
    let reportedDown = false;
    connection.on('error', (error: Error) => {
      if (reportedDown) return;
      reportedDown = true;
      logger.warn(
        { event: 'token.store.subscriber_error', error: error.message },
        'token store subscriber lost Redis',
      );
    });
    // (Re)subscribe whenever the connection becomes ready: at start, and after every reconnect.
    connection.on('ready', () => {
      reportedDown = false;
      const names = [...channels.keys()];
      if (names.length > 0) connection.subscribe(...names).catch(() => undefined);
    });
    connection.on('message', (channel: string, message: string) => {
      for (const listener of channels.get(channel) ?? []) listener(message);
    });
    subscriber = connection;
    return connection;
  };

  return {
    kind: 'redis',
    // A key of another type is a record that is not ours (FOREIGN_VALUE, which no record opens), not Redis failing.
    get: (key) => readString(client, key),
    async set(key, value, ttlMs) {
      await client.set(key, value, 'PX', Math.max(1, Math.ceil(ttlMs)));
    },
    async delete(...keys) {
      if (keys.length > 0) await client.del(...keys);
    },
    async compareAndDelete(key, expected) {
      return Number(await client.eval(COMPARE_AND_DELETE, 1, key, expected)) === 1;
    },
    async acquireLock(key, owner, ttlMs) {
      const leaseMs = Math.max(1, Math.ceil(ttlMs));
      return Number(await client.eval(ACQUIRE_LOCK, 1, key, owner, leaseMs, takeoverAbove(leaseMs))) === 1;
    },
    async releaseLock(key, owner) {
      return Number(await client.eval(COMPARE_AND_DELETE, 1, key, owner)) === 1;
    },
    async extendLock(key, owner, ttlMs) {
      return Number(await client.eval(COMPARE_AND_EXTEND, 1, key, owner, Math.ceil(ttlMs))) === 1;
    },
    async publish(channel, message) {
      await client.publish(channel, message);
    },
    subscribe(channel, listener) {
      const connection = openSubscriber();
      let listeners = channels.get(channel);
      if (!listeners) {
        listeners = new Set();
        channels.set(channel, listeners);
        if (connection.status === 'ready') connection.subscribe(channel).catch(() => undefined);
      }
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
        if (listeners.size > 0 || channels.get(channel) !== listeners) return;
        channels.delete(channel);
        if (connection.status === 'ready') connection.unsubscribe(channel).catch(() => undefined);
      };
    },
    healthy: () => client.status === 'ready',
    async close() {
      channels.clear();
      const connection = subscriber;
      subscriber = undefined;
      if (connection) connection.disconnect();
    },
  };
}
