// A Map whose entries expire on an injectable clock: the in-process stand-in for Redis keys with a TTL.
export interface ExpiringMap<V> {
  get(key: string): V | undefined;
  set(key: string, value: V, ttlMs: number): void;
  delete(key: string): void;
  readonly size: number;
  clear(): void;
}

export function createExpiringMap<V>(now: () => number = Date.now): ExpiringMap<V> {
  const entries = new Map<string, { value: V; expiresAt: number }>();
  return {
    get(key) {
      const entry = entries.get(key);
      if (!entry) return undefined;
      if (entry.expiresAt <= now()) {
        entries.delete(key);
        return undefined;
      }
      return entry.value;
    },
    set(key, value, ttlMs) {
      entries.set(key, { value, expiresAt: now() + Math.max(1, ttlMs) });
    },
    delete(key) {
      entries.delete(key);
    },
    get size() {
      return entries.size;
    },
    clear() {
      entries.clear();
    },
  };
}
