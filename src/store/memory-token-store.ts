// The in-process TokenStore: local mode (no Redis) and unit tests, with expiry on an injectable clock.

import type { ChannelListener, TokenStore } from '../tokens';
import { createExpiringMap } from './expiring-map';

export interface MemoryTokenStoreOptions {
  /** Epoch milliseconds; Date.now by default. */
  readonly now?: () => number;
}

/** Behaves like the Redis store (expiry, owner-checked lock, notifications): one code path in the manager. */
export function createMemoryTokenStore(options: MemoryTokenStoreOptions = {}): TokenStore {
  const now = options.now ?? Date.now;
  const entries = createExpiringMap<string>(now);
  const channels = new Map<string, Set<ChannelListener>>();
  const read = (key: string) => entries.get(key);
  const write = (key: string, value: string, ttlMs: number) => entries.set(key, value, ttlMs);
  const compareAndDelete = (key: string, expected: string) => {
    if (read(key) !== expected) return false;
    entries.delete(key);
    return true;
  };

  return {
    kind: 'memory',
    get: async (key) => read(key),
    set: async (key, value, ttlMs) => write(key, value, ttlMs),
    async delete(...keys) {
      for (const key of keys) entries.delete(key);
    },
    compareAndDelete: async (key, expected) => compareAndDelete(key, expected),
    async acquireLock(key, owner, ttlMs) {
      if (read(key) !== undefined) return false;
      write(key, owner, ttlMs);
      return true;
    },
    releaseLock: async (key, owner) => compareAndDelete(key, owner),
    async extendLock(key, owner, ttlMs) {
      if (read(key) !== owner) return false;
      write(key, owner, ttlMs);
      return true;
    },
    async publish(channel, message) {
      // Delivered asynchronously, as Redis does, so a publisher never re-enters its own listener synchronously.
      const listeners = [...(channels.get(channel) ?? [])];
      queueMicrotask(() => {
        for (const listener of listeners) listener(message);
      });
    },
    subscribe(channel, listener) {
      let set = channels.get(channel);
      if (!set) {
        set = new Set();
        channels.set(channel, set);
      }
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) channels.delete(channel);
      };
    },
    healthy: () => true,
    close: async () => {
      channels.clear();
    },
  };
}
