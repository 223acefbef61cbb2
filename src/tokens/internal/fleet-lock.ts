// The fleet lock around a token endpoint call: one replica calls, the others wait for the pair it shares.
import { randomBytes } from 'node:crypto';
import type { TokenKeys } from '../../keys/redis-keys';
import { NO_TRACING, type Tracing } from '../../observability/tracing';
import type { Clock, ClockTimer } from './clock';
import type { Credentials } from './credentials';
import type { LoginBackoff } from './login-backoff';
import { DOWN, type Down, NOTIFY_RELEASED, type SharedTokenCache } from './shared-token-cache';
import type { TokenPair } from './token-pair';
import type { TokenStore } from './token-store';

export interface FleetLockDeps {
  readonly store: TokenStore;
  readonly cache: SharedTokenCache;
  readonly backoff: LoginBackoff;
  readonly clock: Clock;
  /** Lease of the lock (TOKEN_LOCK_TTL_MS). */
  readonly lockTtlMs: number;
  /** How long one wait for the holder's pair lasts before trying the lock again (TOKEN_LOCK_WAIT_MS). */
  readonly lockWaitMs: number;
  /** Poll period of the store while waiting. */
  readonly pollMs: number;
  readonly stopped: () => boolean;
  readonly tracing?: Tracing;
}

/** One flight's turn at the lock. */
export interface FleetTurn<T> {
  readonly keys: TokenKeys;
  readonly credentials: Credentials;
  /** A pair that ends the wait. */
  readonly accept: (pair: TokenPair | undefined) => pair is TokenPair;
  /** Runs while this replica holds the lock (and renews its lease). */
  readonly asHolder: () => Promise<T>;
  /** What the pair another holder shared becomes. */
  readonly adopt: (pair: TokenPair) => T;
  /** False once the turn's credentials were replaced: the turn ends at once (its flight hands over). */
  readonly current: () => boolean;
}

export class FleetLock {
  private readonly wakers = new Set<() => void>();
  /**
   * Locks let go of, by this replica or announced by another: a wait for a pair the holder did not share (its
   * credentials were retired meanwhile, its call failed) tries the lock again at once, not after TOKEN_LOCK_WAIT_MS.
   */
  private releases = 0;
  /** The token calls this replica makes under the lock, until each released it: stop() lets them finish. */
  private readonly holdings = new Set<Promise<unknown>>();

  constructor(private readonly deps: FleetLockDeps) {}

  /** One replica calls the token endpoints while the rest wait for its pair (undefined: no pair came). */
  async withFleetLock<T>(turn: FleetTurn<T>): Promise<T | undefined> {
    const { cache, clock, store, lockTtlMs, stopped } = this.deps;
    const giveUpAt = clock.now() + 2 * lockTtlMs;
    while (!stopped() && turn.current() && clock.now() < giveUpAt) {
      const owner = randomBytes(12).toString('hex');
      // Counted before the lock is tried: a release announced while the attempt is out still ends the wait below.
      const releases = this.releases;
      const locked = await cache.call('lock', () => store.acquireLock(turn.keys.lock, owner, lockTtlMs));
      if (locked === DOWN) break;
      if (locked) return this.holding(turn.keys, owner, turn.asHolder);
      const waited = await (this.deps.tracing ?? NO_TRACING).inSpan('token.lock.wait', () =>
        this.waitForPair(turn, releases),
      );
      if (waited === DOWN) break;
      if (waited) return turn.adopt(waited);
    }
    return undefined;
  }

  /** Cuts every wait short: the store announced a change, or the manager stops. */
  wake(): void {
    for (const wake of [...this.wakers]) wake();
  }

  /** The lock was let go of, here or by another replica (NOTIFY_RELEASED): a wait finding no pair tries it again. */
  released(): void {
    this.releases++;
    this.wake();
  }

  /**
   * Wakes the waiters, and lets a token call this replica makes under the lock finish for up to TOKEN_LOCK_WAIT_MS (as
   * long as the other replicas wait for its pair): it then shares its pair, releases the lock and tells the fleet.
   * Released while the call is out, another replica would refresh with the same refresh token; a call that outlives
   * the wait (or the process) leaves the lock to its lease.
   */
  async stop(): Promise<void> {
    this.wake();
    if (this.holdings.size === 0) return;
    const { clock, lockWaitMs } = this.deps;
    await new Promise<void>((resolve) => {
      const timer = clock.setTimeout(resolve, lockWaitMs);
      timer.unref?.();
      void Promise.allSettled([...this.holdings]).then(() => {
        clock.clearTimeout(timer);
        resolve();
      });
    });
  }

  private holding<T>(keys: TokenKeys, owner: string, work: () => Promise<T>): Promise<T> {
    const held = this.hold(keys, owner, work);
    this.holdings.add(held);
    const forget = () => this.holdings.delete(held);
    held.then(forget, forget);
    return held;
  }

  private async hold<T>(keys: TokenKeys, owner: string, work: () => Promise<T>): Promise<T> {
    const lease = this.keepLease(keys.lock, owner);
    try {
      return await work();
    } finally {
      lease.stop();
      await this.letGo(keys, owner);
      // Another flight of this replica waits on this lock only when a credential change superseded the holder's.
      this.released();
    }
  }

  /**
   * Releases the lock if it is still this owner's and tells the fleet: a replica waiting for a pair this holder did
   * not share (still on credentials retired meanwhile, or after a failed call) tries the lock at once.
   */
  private async letGo(keys: TokenKeys, owner: string): Promise<void> {
    const { cache, store } = this.deps;
    const unlocked = await cache.call('unlock', () => store.releaseLock(keys.lock, owner));
    if (unlocked === true) await cache.call('publish', () => store.publish(keys.channel, NOTIFY_RELEASED));
  }

  /**
   * Renews the lease at a third of its length while a slow token endpoint keeps the holder busy, until the call ends
   * (the replica stopping too: let lapse, the lock would free the refresh token the call is still spending).
   */
  private keepLease(key: string, owner: string): { stop(): void } {
    const { store, cache, clock, lockTtlMs } = this.deps;
    const extend = store.extendLock?.bind(store);
    if (!extend) return { stop: () => undefined };
    let timer: ClockTimer | undefined;
    let active = true;
    const every = Math.max(100, Math.floor(lockTtlMs / 3));
    const tick = () => {
      timer = clock.setTimeout(() => {
        // A renewal still in flight when the lease is stopped must not schedule another one.
        void cache
          .call('extend_lock', () => extend(key, owner, lockTtlMs))
          .then(() => {
            if (active) tick();
          });
      }, every);
      timer.unref?.();
    };
    tick();
    return {
      stop: () => {
        active = false;
        if (timer) clock.clearTimeout(timer);
        timer = undefined;
      },
    };
  }

  /** Polls the store (woken early by a change notification) until an acceptable pair appears or the wait ends. */
  private async waitForPair(
    turn: FleetTurn<unknown>,
    releases: number,
  ): Promise<TokenPair | undefined | Down> {
    const { cache, backoff, clock, lockWaitMs, pollMs, stopped } = this.deps;
    const deadline = clock.now() + lockWaitMs;
    while (!stopped() && turn.current()) {
      const left = deadline - clock.now();
      if (left <= 0) return undefined;
      await this.sleepOrWake(Math.min(pollMs, left));
      const shared = await cache.read(turn.keys);
      if (shared === DOWN) return DOWN;
      if (turn.accept(shared.pair)) return shared.pair;
      backoff.throwIfBlocked(shared);
      if (this.releases !== releases || !turn.current()) return undefined;
    }
    return undefined;
  }

  private sleepOrWake(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.deps.clock.clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      const timer = this.deps.clock.setTimeout(done, ms);
      this.wakers.add(done);
    });
  }
}
