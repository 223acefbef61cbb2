// The narrow seam between token management and its shared store: opaque strings, a lock and change notifications.

/**
 * Where the token cache reports failed and recovered store calls; the Redis-health owner implements it and alone
 * logs the outage (`noticedBy` names the feature whose call failed first).
 */
export interface StoreHealthReport {
  reportFailure(error?: unknown, noticedBy?: string): void;
  reportSuccess(): void;
}

/** Called with the message published on a channel (never a token: the store carries only change signals). */
export type ChannelListener = (message: string) => void;

/**
 * What the token manager needs from a shared store. Values are opaque strings (the manager encrypts them);
 * every method may reject when the store is unreachable, and the caller falls back to memory or its own login.
 */
export interface TokenStore {
  /** `redis` when shared by the fleet, `memory` when it lives in this process only (local mode, tests). */
  readonly kind: 'memory' | 'redis';
  /**
   * The value under `key`. A key of another type (written by whoever can write Redis) reads as a value no record
   * opens, never as a failure: it is ignored and counted, and the next `set` replaces it.
   */
  get(key: string): Promise<string | undefined>;
  /** Stores `value` for `ttlMs` milliseconds. */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /** Deletes the keys (all in one hash slot). */
  delete(...keys: string[]): Promise<void>;
  /** Deletes `key` only while it still holds exactly `expected` (atomic); true when it deleted. */
  compareAndDelete(key: string, expected: string): Promise<boolean>;
  /**
   * Takes the lock when nobody holds it (SET NX PX); true when `owner` now holds it for `ttlMs`. A held lock is never
   * taken, however long its lease, unless no replica could have written it (the Redis store: no expiry, a lease past
   * both `ttlMs` and the longest TOKEN_LOCK_TTL_MS, not a string).
   */
  acquireLock(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Releases the lock only when `owner` still holds it (atomic); true when it released. */
  releaseLock(key: string, owner: string): Promise<boolean>;
  /** Renews the lease when `owner` still holds the lock; true when renewed. */
  extendLock?(key: string, owner: string, ttlMs: number): Promise<boolean>;
  publish(channel: string, message: string): Promise<void>;
  /**
   * Listens on `channel` until the returned function is called. Subscribing never waits on the store: when it is
   * unreachable the subscription is made (and remade) as soon as it answers again.
   */
  subscribe(channel: string, listener: ChannelListener): () => void;
  /** The store answers right now (always true in memory). */
  healthy(): boolean;
  /** Closes connections the store opened itself (never the shared client it was given). */
  close(): Promise<void>;
}
