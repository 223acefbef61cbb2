// Obtains, caches, shares and renews the upstream token pair for the whole fleet of replicas (SPEC §5).
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { GatewayError, isGatewayError } from '../http/gateway-error';
import type { Metrics } from '../observability/metrics';
import type { TokenStore } from '../store/token-store';
import type { CredentialSource, Credentials } from './credentials';
import { ACCESS_FALLBACK_SECONDS, REFRESH_FALLBACK_SECONDS, tokenExpiresAt } from './jwt-expiry';
import {
  backoffRemaining,
  decodeRefusal,
  encodeRefusal,
  isRefusal,
  type Refusal,
  type RefusalReason,
  refusalError,
} from './login-backoff';
import { createTokenCipher, type TokenCipher } from './token-cipher';
import type { TokenClient } from './token-client';
import type { AccessToken, TokenProvider, TokenSource, TokenStatus } from './token-provider';

export interface ClockTimer {
  unref?(): unknown;
}

/** Time as the manager sees it; tests hand in a fake one. */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout),
};

export interface TokenManagerSettings {
  /** Part of the store key: sandbox and production never share a pair. */
  readonly upstreamBaseUrl: string;
  /** Refresh in the background when less than this is left (TOKEN_REFRESH_SKEW_SECONDS). */
  readonly refreshSkewSeconds: number;
  /** Lease of the fleet lock around a token endpoint call (TOKEN_LOCK_TTL_MS). */
  readonly lockTtlMs: number;
  /** How long a replica waits for the lock holder's new pair before trying itself (TOKEN_LOCK_WAIT_MS). */
  readonly lockWaitMs: number;
  /** After a refused login (401) or IP (403), no replica tries again for this long (TOKEN_LOGIN_MIN_INTERVAL_MS). */
  readonly loginMinIntervalMs: number;
  /** REDIS_KEY_PREFIX. */
  readonly keyPrefix: string;
  /** TOKEN_ENCRYPTION_KEY (32 bytes): the cached pair is sealed with AES-256-GCM. */
  readonly encryptionKey?: Buffer;
  /** A token is no longer handed out this long before its `exp`. Default min(5 s, skew / 2). */
  readonly expiryMarginMs?: number;
  /** Poll period while waiting for another replica's pair. Default 50 ms. */
  readonly pollIntervalMs?: number;
  /** After a slow store failure, the store is left alone for this long (requests never queue on a hung Redis). Default 2 s. */
  readonly storeRetryMs?: number;
}

export interface TokenManagerDeps {
  readonly store: TokenStore;
  readonly client: TokenClient;
  readonly credentials: CredentialSource;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'tokenRequests' | 'tokenSource' | 'storeHealthy' | 'storeErrors'>;
  readonly settings: TokenManagerSettings;
  readonly clock?: Clock;
  /** [0, 1) for the refresh jitter; Math.random by default. */
  readonly random?: () => number;
}

/** Store names of one credential's pair. They share the hash tag in braces: one Redis Cluster slot. */
export interface TokenKeys {
  readonly pair: string;
  readonly lock: string;
  readonly failure: string;
  readonly channel: string;
}

export function tokenKeys(keyPrefix: string, upstreamBaseUrl: string, username: string): TokenKeys {
  const hash = createHash('sha256').update(`${upstreamBaseUrl}\n${username}`).digest('hex').slice(0, 16);
  const base = `${keyPrefix}{token:${hash}}`;
  return {
    pair: `${base}:pair`,
    lock: `${base}:lock`,
    failure: `${base}:failure`,
    channel: `${base}:changed`,
  };
}

/** The cached value (sealed when a key is configured). */
interface TokenPair {
  readonly access: string;
  readonly refresh: string;
  readonly accessExpiresAt: number;
  readonly refreshExpiresAt: number;
  /** Fingerprint of the credentials that obtained it: pairs of older credentials are ignored. */
  readonly credentials: string;
}

/** What a flight is for: a caller without a usable token, the proactive refresh, or a token the upstream refused. */
type FlightKind = 'need' | 'refresh' | 'renew';

interface SharedState {
  readonly raw?: string;
  readonly pair?: TokenPair;
  readonly refusal?: Refusal;
}

/** A store call that failed (or was skipped while the store is down). */
const DOWN = Symbol('store down');
type Down = typeof DOWN;

/** A store failure slower than this (a hung Redis) makes the manager leave the store alone for storeRetryMs. */
const SLOW_STORE_FAILURE_MS = 100;

const NOTIFY_PAIR = 'pair';
const NOTIFY_REFUSED = 'refused';

export function createTokenManager(deps: TokenManagerDeps): TokenProvider {
  return new FleetTokenManager(deps);
}

class FleetTokenManager implements TokenProvider {
  private readonly store: TokenStore;
  private readonly client: TokenClient;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly metrics: TokenManagerDeps['metrics'];
  private readonly random: () => number;
  private readonly cipher: TokenCipher;
  private readonly settings: TokenManagerSettings;
  private readonly skewMs: number;
  private readonly marginMs: number;
  private readonly pollMs: number;
  private readonly storeRetryMs: number;
  private readonly memoryHits: { inc(): void };

  private credentials: Credentials;
  private keys: TokenKeys;
  private pair?: TokenPair;
  /** The answer of the fast path, built once per pair: a valid token costs no I/O and no allocation. */
  private memo?: Promise<AccessToken>;
  private usableUntil = 0;
  private flight?: Promise<AccessToken>;
  private refusal?: Refusal;
  private lastFailure?: string;
  private refreshTimer?: ClockTimer;
  private heldLock?: { readonly key: string; readonly owner: string };
  private storeSkipUntil = 0;
  private storeOk = true;
  private stopped = false;
  private rereading = false;
  private readonly wakers = new Set<() => void>();
  private unsubscribeChannel?: () => void;
  private unsubscribeCredentials?: () => void;

  constructor(deps: TokenManagerDeps) {
    this.store = deps.store;
    this.client = deps.client;
    this.clock = deps.clock ?? systemClock;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
    this.random = deps.random ?? Math.random;
    this.settings = deps.settings;
    this.cipher = createTokenCipher(deps.settings.encryptionKey);
    this.skewMs = deps.settings.refreshSkewSeconds * 1000;
    this.marginMs = deps.settings.expiryMarginMs ?? Math.min(5_000, this.skewMs / 2);
    this.pollMs = deps.settings.pollIntervalMs ?? 50;
    this.storeRetryMs = deps.settings.storeRetryMs ?? 2_000;
    this.memoryHits = deps.metrics.tokenSource.labels('memory');
    this.credentials = deps.credentials.current();
    this.keys = this.keysFor(this.credentials);
    this.unsubscribeCredentials = deps.credentials.onChange((next) => this.onCredentialsChange(next));
  }

  getAccessToken(): Promise<AccessToken> {
    if (this.memo !== undefined && this.clock.now() < this.usableUntil) {
      this.memoryHits.inc();
      return this.memo;
    }
    const blocked = this.localBackoff();
    if (blocked) return Promise.reject(blocked);
    return this.join('need').then(this.counted);
  }

  async renewAfterRejection(rejected: string): Promise<AccessToken> {
    if (this.pair?.access === rejected) {
      this.dropMemory();
    } else if (this.memo !== undefined && this.clock.now() < this.usableUntil) {
      // Another caller already replaced the refused token.
      return this.counted(await this.memo);
    }
    const running = this.flight;
    if (running) {
      const token = await running.catch(() => undefined);
      if (token && token.value !== rejected) return this.counted(token);
      if (this.pair?.access === rejected) this.dropMemory();
    }
    const blocked = this.localBackoff();
    if (blocked) throw blocked;
    return this.counted(await this.join('renew', rejected));
  }

  status(): TokenStatus {
    return {
      hasValidToken: this.pair !== undefined && this.clock.now() < this.pair.accessExpiresAt,
      lastFailure: this.lastFailure,
      storeHealthy: this.storeOk && this.store.healthy(),
    };
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.metrics.storeHealthy.set(this.store.healthy() ? 1 : 0);
    this.unsubscribeChannel = this.store.subscribe(this.keys.channel, this.onNotification);
    // A warm fleet: adopt the shared pair now rather than on the first request.
    await this.adoptFromStore();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.clearRefreshTimer();
    this.unsubscribeChannel?.();
    this.unsubscribeChannel = undefined;
    this.unsubscribeCredentials?.();
    this.unsubscribeCredentials = undefined;
    for (const wake of [...this.wakers]) wake();
    const held = this.heldLock;
    this.heldLock = undefined;
    if (held) await this.storeCall('unlock', () => this.store.releaseLock(held.key, held.owner));
  }

  // --- the single flight -------------------------------------------------------------------------------------

  /** Concurrent needs inside this replica share one promise. */
  private join(kind: FlightKind, rejected?: string): Promise<AccessToken> {
    if (!this.flight) {
      const flight = this.fly(kind, rejected).finally(() => {
        if (this.flight === flight) this.flight = undefined;
      });
      this.flight = flight;
    }
    return this.flight;
  }

  /**
   * Shared store first; then the fleet lock: its holder re-reads the store (another replica may just have
   * refreshed, and a spent refresh token must never be reused), calls the token endpoint, writes and announces
   * the pair. The others wait for that pair, bounded, and in the end fetch for themselves.
   */
  private async fly(kind: FlightKind, rejected?: string): Promise<AccessToken> {
    const credentials = this.credentials;
    const keys = this.keys;
    const trigger = this.pair;
    const accept = (pair: TokenPair | undefined): pair is TokenPair =>
      this.acceptable(kind, pair, credentials, trigger, rejected);
    let latest = trigger?.credentials === credentials.fingerprint ? trigger : undefined;

    const shared = await this.readShared(keys, rejected);
    if (shared !== DOWN) {
      if (accept(shared.pair)) return this.adopt(shared.pair, 'redis');
      latest = newest(latest, shared.pair, credentials);
      this.throwIfRefused(shared.refusal, credentials);
      // While another replica holds the lock (its lease renewed as long as it works), wait for its pair rather
      // than call the token endpoints alongside it; a holder that died lets its lease lapse within lockTtlMs.
      const giveUpAt = this.clock.now() + 2 * this.settings.lockTtlMs;
      while (!this.stopped && this.clock.now() < giveUpAt) {
        const owner = randomBytes(12).toString('hex');
        const locked = await this.storeCall('lock', () =>
          this.store.acquireLock(keys.lock, owner, this.settings.lockTtlMs),
        );
        if (locked === DOWN) break;
        if (locked) return this.asLockHolder(kind, keys, owner, credentials, latest, accept, rejected);
        const waited = await this.waitForShared(keys, credentials, accept);
        if (waited === DOWN) break;
        if (waited) return this.adopt(waited, 'redis');
      }
      if (this.stopped) throw new GatewayError('UPSTREAM_UNAVAILABLE', 'The gateway is shutting down.');
      // The proactive refresh never forces its way past a busy lock while the current token still serves.
      if (kind === 'refresh' && this.pair && this.clock.now() < this.usableUntil)
        return this.tokenOf(this.pair, 'memory');
    }
    return this.fetchAndShare(keys, credentials, latest);
  }

  private async asLockHolder(
    kind: FlightKind,
    keys: TokenKeys,
    owner: string,
    credentials: Credentials,
    latest: TokenPair | undefined,
    accept: (pair: TokenPair | undefined) => pair is TokenPair,
    rejected?: string,
  ): Promise<AccessToken> {
    this.heldLock = { key: keys.lock, owner };
    const lease = this.keepLease(keys.lock, owner);
    try {
      const again = await this.readShared(keys, rejected);
      if (again !== DOWN) {
        if (accept(again.pair)) return this.adopt(again.pair, 'redis');
        this.throwIfRefused(again.refusal, credentials);
      }
      const base = again === DOWN ? latest : newest(latest, again.pair, credentials);
      this.logger.debug({ event: 'token.lock', result: 'acquired', kind }, 'token lock acquired');
      return await this.fetchAndShare(keys, credentials, base);
    } finally {
      lease.stop();
      if (this.heldLock?.owner === owner) this.heldLock = undefined;
      await this.storeCall('unlock', () => this.store.releaseLock(keys.lock, owner));
    }
  }

  /** Renews the lease at a third of its length while a slow token endpoint keeps the holder busy. */
  private keepLease(key: string, owner: string): { stop(): void } {
    const extend = this.store.extendLock?.bind(this.store);
    if (!extend) return { stop: () => undefined };
    let timer: ClockTimer | undefined;
    let active = true;
    const every = Math.max(100, Math.floor(this.settings.lockTtlMs / 3));
    const tick = () => {
      timer = this.clock.setTimeout(() => {
        // A renewal still in flight when the lease is stopped must not schedule another one.
        void this.storeCall('extend_lock', () => extend(key, owner, this.settings.lockTtlMs)).then(() => {
          if (active && !this.stopped) tick();
        });
      }, every);
      timer.unref?.();
    };
    tick();
    return {
      stop: () => {
        active = false;
        if (timer) this.clock.clearTimeout(timer);
        timer = undefined;
      },
    };
  }

  private acceptable(
    kind: FlightKind,
    pair: TokenPair | undefined,
    credentials: Credentials,
    trigger: TokenPair | undefined,
    rejected?: string,
  ): boolean {
    if (!pair || pair.credentials !== credentials.fingerprint || pair.access === rejected) return false;
    const now = this.clock.now();
    if (now >= pair.accessExpiresAt - this.marginMs) return false;
    // A refresh is satisfied by any pair newer than the one that fell due (another replica's refresh).
    if (kind === 'refresh' && trigger)
      return pair.access !== trigger.access && pair.accessExpiresAt >= trigger.accessExpiresAt;
    return true;
  }

  /** Polls the store (woken early by a change notification) until an acceptable pair appears or the wait ends. */
  private async waitForShared(
    keys: TokenKeys,
    credentials: Credentials,
    accept: (pair: TokenPair | undefined) => pair is TokenPair,
  ): Promise<TokenPair | undefined | Down> {
    const deadline = this.clock.now() + this.settings.lockWaitMs;
    while (!this.stopped) {
      const left = deadline - this.clock.now();
      if (left <= 0) return undefined;
      await this.sleepOrWake(Math.min(this.pollMs, left));
      const shared = await this.readShared(keys);
      if (shared === DOWN) return DOWN;
      if (accept(shared.pair)) return shared.pair;
      this.throwIfRefused(shared.refusal, credentials);
    }
    return undefined;
  }

  private sleepOrWake(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.clock.clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      const timer = this.clock.setTimeout(done, ms);
      this.wakers.add(done);
    });
  }

  // --- the token endpoints --------------------------------------------------------------------------------------

  private async fetchAndShare(
    keys: TokenKeys,
    credentials: Credentials,
    base?: TokenPair,
  ): Promise<AccessToken> {
    const pair = await this.fetchUpstream(keys, credentials, base);
    const token = this.adopt(pair, 'upstream');
    await this.writeShared(keys, pair);
    return token;
  }

  /** The refresh token first (unless it is near its end); the credentials when it is refused. */
  private async fetchUpstream(
    keys: TokenKeys,
    credentials: Credentials,
    base?: TokenPair,
  ): Promise<TokenPair> {
    if (base && base.refreshExpiresAt - this.clock.now() > this.skewMs) {
      const started = this.clock.now();
      try {
        const answer = await this.client.refresh(base.refresh);
        this.recordCall('refresh', 'success', started);
        return this.pairOf(answer.access, answer.refresh, credentials, base);
      } catch (error) {
        this.recordCall('refresh', resultOf(error), started);
        if (isGatewayError(error) && error.reason === 'UPSTREAM_IP_NOT_WHITELISTED') {
          await this.recordRefusal(error.reason, keys, credentials);
          throw error;
        }
        if (!isGatewayError(error) || error.reason !== 'UPSTREAM_AUTH_FAILED') throw this.failed(error);
        // The refresh token was refused (expired, revoked, rotated away): log in.
      }
    }
    const blocked = this.localBackoff();
    if (blocked) throw blocked;
    const started = this.clock.now();
    try {
      const answer = await this.client.login(credentials);
      this.recordCall('login', 'success', started);
      return this.pairOf(answer.access, answer.refresh, credentials);
    } catch (error) {
      this.recordCall('login', resultOf(error), started);
      if (isRefusal(error)) await this.recordRefusal(error.reason, keys, credentials);
      throw this.failed(error);
    }
  }

  /** A rotated refresh token replaces the old one; without rotation the old one (and its expiry) stays. */
  private pairOf(
    access: string,
    refresh: string | undefined,
    credentials: Credentials,
    base?: TokenPair,
  ): TokenPair {
    const now = this.clock.now();
    const kept = refresh === undefined ? base : undefined;
    if (!refresh && !kept)
      throw new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream token endpoint gave no refresh token.');
    return {
      access,
      refresh: refresh ?? (kept as TokenPair).refresh,
      accessExpiresAt: tokenExpiresAt(access, ACCESS_FALLBACK_SECONDS, now),
      refreshExpiresAt: kept
        ? kept.refreshExpiresAt
        : tokenExpiresAt(refresh as string, REFRESH_FALLBACK_SECONDS, now),
      credentials: credentials.fingerprint,
    };
  }

  private recordCall(kind: 'login' | 'refresh', result: string, started: number): void {
    this.metrics.tokenRequests.inc({ kind, result });
    const durationMs = this.clock.now() - started;
    const entry = { event: `token.${kind}`, result, durationMs };
    if (result === 'success') this.logger.info(entry, `token ${kind} succeeded`);
    else this.logger.warn(entry, `token ${kind} failed`);
  }

  private failed(error: unknown): unknown {
    this.lastFailure = isGatewayError(error) ? error.reason : 'UPSTREAM_UNAVAILABLE';
    return error;
  }

  /** Remembers a refusal here and for the fleet, so nobody asks the upstream again before the interval ends. */
  private async recordRefusal(
    reason: RefusalReason,
    keys: TokenKeys,
    credentials: Credentials,
  ): Promise<void> {
    const refusal: Refusal = { reason, at: this.clock.now(), credentials: credentials.fingerprint };
    this.refusal = refusal;
    this.lastFailure = reason;
    const ttl = this.settings.loginMinIntervalMs;
    if (ttl <= 0) return;
    const written = await this.storeCall('set', () =>
      this.store.set(keys.failure, encodeRefusal(refusal), ttl),
    );
    if (written !== DOWN)
      await this.storeCall('publish', () => this.store.publish(keys.channel, NOTIFY_REFUSED));
  }

  private localBackoff(): GatewayError | undefined {
    const refusal = this.refusal;
    if (!refusal) return undefined;
    const left = this.backoffLeft(refusal, this.credentials.fingerprint);
    return left > 0 ? refusalError(refusal.reason, left) : undefined;
  }

  private backoffLeft(refusal: Refusal | undefined, fingerprint: string): number {
    return backoffRemaining(refusal, fingerprint, this.clock.now(), this.settings.loginMinIntervalMs);
  }

  private throwIfRefused(refusal: Refusal | undefined, credentials: Credentials): void {
    const left = this.backoffLeft(refusal, credentials.fingerprint);
    if (!refusal || left <= 0) return;
    this.refusal = refusal;
    this.lastFailure = refusal.reason;
    throw refusalError(refusal.reason, left);
  }

  // --- memory and the proactive refresh ------------------------------------------------------------------------

  private adopt(pair: TokenPair, source: TokenSource): AccessToken {
    // A flight that started before a credential change must not bring the old credentials' pair back.
    if (pair.credentials === this.credentials.fingerprint && !this.stopped) {
      this.pair = pair;
      this.usableUntil = pair.accessExpiresAt - this.marginMs;
      this.memo = Promise.resolve(this.tokenOf(pair, 'memory'));
      this.refusal = undefined;
      this.lastFailure = undefined;
      this.scheduleRefresh();
    }
    return this.tokenOf(pair, source);
  }

  private tokenOf(pair: TokenPair, source: TokenSource): AccessToken {
    return { value: pair.access, expiresAt: pair.accessExpiresAt, source };
  }

  private readonly counted = (token: AccessToken): AccessToken => {
    this.metrics.tokenSource.inc({ source: token.source });
    return token;
  };

  private dropMemory(): void {
    this.pair = undefined;
    this.memo = undefined;
    this.usableUntil = 0;
    this.clearRefreshTimer();
  }

  /** At exp − skew − jitter (up to 10 % of the skew, so replicas do not all fire at once). */
  private scheduleRefresh(delayMs?: number): void {
    this.clearRefreshTimer();
    const pair = this.pair;
    if (this.stopped || !pair) return;
    const due = pair.accessExpiresAt - this.skewMs - this.random() * 0.1 * this.skewMs - this.clock.now();
    const timer = this.clock.setTimeout(() => this.onRefreshDue(pair), Math.max(0, delayMs ?? due));
    timer.unref?.();
    this.refreshTimer = timer;
  }

  private clearRefreshTimer(): void {
    if (this.refreshTimer) this.clock.clearTimeout(this.refreshTimer);
    this.refreshTimer = undefined;
  }

  private onRefreshDue(due: TokenPair): void {
    this.refreshTimer = undefined;
    if (this.stopped || this.pair !== due) return;
    this.join('refresh').then(
      () => {
        if (this.pair === due) this.retryRefreshSoon();
      },
      (error: unknown) => {
        this.logger.warn(
          { event: 'token.refresh.background', result: resultOf(error) },
          'background token refresh failed; the current token keeps serving',
        );
        if (this.pair === due) this.retryRefreshSoon();
      },
    );
  }

  /** The current token still serves: try again before it runs out, never in a tight loop. */
  private retryRefreshSoon(): void {
    const left = this.usableUntil - this.clock.now();
    if (left <= 0) return;
    const backoff = this.backoffLeft(this.refusal, this.credentials.fingerprint);
    this.scheduleRefresh(Math.max(backoff, Math.min(5_000, Math.max(200, left / 3))));
  }

  // --- the shared store ----------------------------------------------------------------------------------------

  private readonly onNotification = (message: string): void => {
    for (const wake of [...this.wakers]) wake();
    if (!this.flight && (message === NOTIFY_PAIR || message === NOTIFY_REFUSED)) void this.adoptFromStore();
  };

  /** Another replica wrote a pair (or a refusal): take it when it is newer than ours. */
  private async adoptFromStore(): Promise<void> {
    if (this.rereading || this.stopped) return;
    this.rereading = true;
    try {
      const credentials = this.credentials;
      const shared = await this.readShared(this.keys);
      if (shared === DOWN) return;
      const pair = shared.pair;
      const current = this.pair;
      if (
        pair &&
        pair.credentials === credentials.fingerprint &&
        pair.access !== current?.access &&
        pair.accessExpiresAt >= (current?.accessExpiresAt ?? 0) &&
        this.clock.now() < pair.accessExpiresAt - this.marginMs
      ) {
        this.adopt(pair, 'redis');
        this.logger.debug({ event: 'token.adopt' }, 'adopted the pair another replica obtained');
      } else if (shared.refusal && this.backoffLeft(shared.refusal, credentials.fingerprint) > 0) {
        this.refusal = shared.refusal;
        this.lastFailure = shared.refusal.reason;
      }
    } finally {
      this.rereading = false;
    }
  }

  /**
   * The stored pair and refusal. When `rejected` is the stored access token, that exact stored value is
   * compare-and-deleted: a newer pair written meanwhile by another replica survives.
   */
  private async readShared(keys: TokenKeys, rejected?: string): Promise<SharedState | Down> {
    const values = await this.storeCall('get', () =>
      Promise.all([this.store.get(keys.pair), this.store.get(keys.failure)]),
    );
    if (values === DOWN) return DOWN;
    const [raw, rawRefusal] = values;
    const pair = raw === undefined ? undefined : this.decode(raw, keys.pair);
    if (raw !== undefined && pair === undefined) {
      this.logger.warn(
        { event: 'token.store.unreadable' },
        'the cached token pair cannot be read; ignoring it',
      );
    }
    if (raw !== undefined && pair !== undefined && rejected !== undefined && pair.access === rejected) {
      await this.storeCall('compare_and_delete', () => this.store.compareAndDelete(keys.pair, raw));
    }
    return { raw, pair, refusal: decodeRefusal(rawRefusal) };
  }

  private async writeShared(keys: TokenKeys, pair: TokenPair): Promise<void> {
    const ttl = pair.refreshExpiresAt - this.clock.now();
    if (ttl <= 0) return;
    const raw = this.encode(pair, keys.pair);
    const written = await this.storeCall('set', () => this.store.set(keys.pair, raw, ttl));
    if (written !== DOWN)
      await this.storeCall('publish', () => this.store.publish(keys.channel, NOTIFY_PAIR));
  }

  /**
   * Every store call goes through here: an error is logged (never with a value), counted and answered with
   * DOWN, and the store is left alone for a moment so requests never queue on an unreachable Redis.
   */
  private async storeCall<T>(operation: string, call: () => Promise<T>): Promise<T | Down> {
    if (this.clock.now() < this.storeSkipUntil) return DOWN;
    const started = this.clock.now();
    try {
      const value = await call();
      this.markStore(true);
      return value;
    } catch (error) {
      // A refused or not-yet-connected Redis fails in no time and costs nothing; only a slow failure (a hung
      // server, a command timeout) makes the next calls skip the store for a moment.
      if (this.clock.now() - started >= SLOW_STORE_FAILURE_MS)
        this.storeSkipUntil = this.clock.now() + this.storeRetryMs;
      this.metrics.storeErrors.inc({ operation });
      const entry = { event: 'token.store.error', operation, error: (error as Error)?.message };
      if (this.storeOk)
        this.logger.warn(entry, 'token store unavailable; serving from memory and own logins');
      else this.logger.debug(entry, 'token store still unavailable');
      this.markStore(false);
      return DOWN;
    }
  }

  private markStore(ok: boolean): void {
    if (ok === this.storeOk) return;
    this.storeOk = ok;
    this.metrics.storeHealthy.set(ok ? 1 : 0);
    if (ok) this.logger.info({ event: 'token.store.recovered' }, 'token store reachable again');
  }

  private encode(pair: TokenPair, key: string): string {
    return this.cipher.seal(JSON.stringify(pair), key);
  }

  private decode(raw: string, key: string): TokenPair | undefined {
    const text = this.cipher.open(raw, key);
    if (text === undefined) return undefined;
    try {
      const value = JSON.parse(text) as Partial<TokenPair>;
      if (
        typeof value.access === 'string' &&
        typeof value.refresh === 'string' &&
        typeof value.accessExpiresAt === 'number' &&
        typeof value.refreshExpiresAt === 'number' &&
        typeof value.credentials === 'string'
      ) {
        return {
          access: value.access,
          refresh: value.refresh,
          accessExpiresAt: value.accessExpiresAt,
          refreshExpiresAt: value.refreshExpiresAt,
          credentials: value.credentials,
        };
      }
    } catch {
      // not JSON: treated as absent
    }
    return undefined;
  }

  // --- credential rotation -------------------------------------------------------------------------------------

  private keysFor(credentials: Credentials): TokenKeys {
    return tokenKeys(this.settings.keyPrefix, this.settings.upstreamBaseUrl, credentials.username);
  }

  /** Tokens of the old credentials are dropped; the backoff of the old credentials ends. */
  private onCredentialsChange(next: Credentials): void {
    const previous = this.keys;
    this.credentials = next;
    this.keys = this.keysFor(next);
    this.dropMemory();
    this.refusal = undefined;
    this.lastFailure = undefined;
    if (this.unsubscribeChannel && previous.channel !== this.keys.channel) {
      this.unsubscribeChannel();
      this.unsubscribeChannel = this.store.subscribe(this.keys.channel, this.onNotification);
    }
    this.logger.info(
      { event: 'token.credentials_changed' },
      'upstream credentials changed; cached tokens dropped',
    );
  }
}

/** The pair with the later access expiry among those of the current credentials. */
function newest(
  a: TokenPair | undefined,
  b: TokenPair | undefined,
  credentials: Credentials,
): TokenPair | undefined {
  const usable = (p?: TokenPair) => (p?.credentials === credentials.fingerprint ? p : undefined);
  const [x, y] = [usable(a), usable(b)];
  if (!x) return y;
  if (!y) return x;
  return y.accessExpiresAt >= x.accessExpiresAt ? y : x;
}

function resultOf(error: unknown): string {
  return isGatewayError(error) ? error.reason.toLowerCase() : 'error';
}
