// Obtains, caches, shares and renews the upstream token pair for the whole fleet of replicas.
import type { Logger } from 'pino';
import { GatewayError } from '../../http/gateway-error';
import { type TokenKeys, tokenKeys } from '../../keys/redis-keys';
import type { Metrics } from '../../observability/metrics';
import { NO_TRACING, type Tracing } from '../../observability/tracing';
import { type Clock, systemClock } from './clock';
import type { CredentialSource, Credentials } from './credentials';
import { FleetLock } from './fleet-lock';
import { LOGIN_MAX_INTERVAL_DEFAULT_MS, LoginBackoff, TRANSIENT_DEFAULTS } from './login-backoff';
import type { RecordSeal } from './record-seal';
import { RefreshScheduler } from './refresh-scheduler';
import {
  DOWN,
  type Down,
  NOTIFY_PAIR,
  NOTIFY_REFUSED,
  NOTIFY_RELEASED,
  type SharedState,
  SharedTokenCache,
} from './shared-token-cache';
import type { TokenClient } from './token-client';
import { TokenEndpoint } from './token-endpoint';
import { endsFlight, type FlightKind, newest, replaces, type TokenPair, tokenOf } from './token-pair';
import type { AccessToken, TokenProvider, TokenSource, TokenStatus } from './token-provider';
import type { StoreHealthReport, TokenStore } from './token-store';

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
  /** Each further refusal doubles the wait up to this (TOKEN_LOGIN_MAX_INTERVAL_MS). Default 15 min. */
  readonly loginMaxIntervalMs?: number;
  /** The first wait after a transient token-endpoint failure (5xx, timeout, 429). Default 1 s. */
  readonly transientMinMs?: number;
  /** The longest transient wait (a 429's Retry-After may ask for more). Default 30 s. */
  readonly transientMaxMs?: number;
  /** REDIS_KEY_PREFIX. */
  readonly keyPrefix: string;
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
  readonly metrics: Pick<
    Metrics,
    'tokenRequests' | 'tokenSource' | 'storeErrors' | 'storeRecordsRejected' | 'tokenBackoff'
  >;
  readonly settings: TokenManagerSettings;
  /** Seals the cached pair and the failure records (AES-256-GCM with TOKEN_ENCRYPTION_KEY), counting forgeries. */
  readonly seal: RecordSeal;
  /** Told of failed and recovered store calls (the Redis-health owner); absent in tests of the manager alone. */
  readonly storeHealth?: StoreHealthReport;
  readonly clock?: Clock;
  /** [0, 1) for the refresh and back-off jitter; Math.random by default. */
  readonly random?: () => number;
  /** Spans of the store read, the wait on the fleet lock and the token endpoint calls. */
  readonly tracing?: Tracing;
}

/** Thrown inside a flight whose credentials were replaced before it called the token endpoint (never to a caller). */
const SUPERSEDED = Symbol('flight superseded by a credential change');

/** Span attributes of a read of the shared store: whether it answered and held a pair (never the pair itself). */
function storeReadAttributes(shared: SharedState | Down) {
  return {
    'gateway.token.store.answered': shared !== DOWN,
    'gateway.token.pair_found': shared !== DOWN && !!shared.pair,
  };
}

export function createTokenManager(deps: TokenManagerDeps): TokenProvider {
  return new FleetTokenManager(deps);
}

class FleetTokenManager implements TokenProvider {
  private readonly store: TokenStore;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly metrics: TokenManagerDeps['metrics'];
  private readonly settings: TokenManagerSettings;
  private readonly marginMs: number;
  private readonly memoryHits: { inc(): void };
  private readonly cache: SharedTokenCache;
  private readonly backoff: LoginBackoff;
  private readonly endpoint: TokenEndpoint;
  private readonly lock: FleetLock;
  private readonly refresher: RefreshScheduler;
  private readonly tracing: Tracing;

  private credentials: Credentials;
  private keys: TokenKeys;
  private pair?: TokenPair;
  /** The answer of the fast path, built once per pair: a valid token costs no I/O and no allocation. */
  private memo?: Promise<AccessToken>;
  private usableUntil = 0;
  private flight?: Promise<AccessToken>;
  private stopped = false;
  private rereading = false;
  private unsubscribeChannel?: () => void;
  /** The token the last renewal after a rejection obtained, until the provider accepts a call. */
  private renewedToken?: string;
  private unsubscribeCredentials?: () => void;

  constructor(deps: TokenManagerDeps) {
    const { store, logger, metrics, settings } = deps;
    const clock = deps.clock ?? systemClock;
    const skewMs = settings.refreshSkewSeconds * 1000;
    this.store = store;
    this.clock = clock;
    this.logger = logger;
    this.metrics = metrics;
    this.settings = settings;
    this.marginMs = settings.expiryMarginMs ?? Math.min(5_000, skewMs / 2);
    this.memoryHits = metrics.tokenSource.labels({ source: 'memory' });
    this.credentials = deps.credentials.current();
    this.keys = this.keysFor(this.credentials);
    const storeRetryMs = settings.storeRetryMs ?? 2_000;
    const cache = new SharedTokenCache({
      store,
      seal: deps.seal,
      clock,
      logger,
      metrics,
      storeRetryMs,
      health: deps.storeHealth,
    });
    const random = deps.random ?? Math.random;
    const backoff = new LoginBackoff(this.credentials.fingerprint, () => clock.now(), random, {
      loginMinIntervalMs: settings.loginMinIntervalMs,
      loginMaxIntervalMs: Math.max(
        settings.loginMinIntervalMs,
        settings.loginMaxIntervalMs ?? LOGIN_MAX_INTERVAL_DEFAULT_MS,
      ),
      transientMinMs: settings.transientMinMs ?? TRANSIENT_DEFAULTS.transientMinMs,
      transientMaxMs: settings.transientMaxMs ?? TRANSIENT_DEFAULTS.transientMaxMs,
    });
    metrics.tokenBackoff.readFrom(() => backoff.remainingByKind());
    const stopped = () => this.stopped;
    const tracing = deps.tracing ?? NO_TRACING;
    this.tracing = tracing;
    // The helpers share the store, its guard, the backoff and the observability of this manager.
    const common = { store, cache, backoff, clock, logger, metrics, stopped, tracing };
    this.cache = cache;
    this.backoff = backoff;
    const { lockTtlMs, lockWaitMs } = settings;
    this.endpoint = new TokenEndpoint({ ...common, client: deps.client, skewMs });
    this.lock = new FleetLock({ ...common, lockTtlMs, lockWaitMs, pollMs: settings.pollIntervalMs ?? 50 });
    this.refresher = new RefreshScheduler({
      clock,
      logger,
      random,
      skewMs,
      current: () => this.pair,
      usableUntil: () => this.usableUntil,
      backoffLeft: () => backoff.remaining(),
      stopped,
      refresh: () => tracing.background('token.background_refresh', () => this.join('refresh')),
    });
    this.unsubscribeCredentials = deps.credentials.onChange((next) => this.onCredentialsChange(next));
  }

  getAccessToken(): Promise<AccessToken> {
    if (this.memo !== undefined && this.clock.now() < this.usableUntil) {
      this.memoryHits.inc();
      return this.memo;
    }
    const blocked = this.backoff.blocked();
    if (blocked) return Promise.reject(blocked);
    return this.join('need').then(this.counted);
  }

  async renewAfterRejection(rejected: string): Promise<AccessToken> {
    // A token renewed after a rejection is rejected too, or tokens keep being rejected: the provider refuses the
    // tokens it issues, and renewing per request would log in once per caller request.
    if (rejected === this.renewedToken || this.backoff.rejectingTokens) {
      if (this.pair?.access === rejected) this.dropMemory();
      const blocked = this.backoff.blocked();
      if (blocked) throw blocked;
      // The refused pair leaves the store too (compare before delete), so no replica adopts it again.
      const shared = await this.cache.read(this.keys, rejected);
      // A streak another replica has since ended (an accepted call cleared the fleet's record): a single rejection.
      const fleetRejecting = shared === DOWN || shared.refusal?.tokenRejected === true;
      if (rejected === this.renewedToken || fleetRejecting)
        throw await this.endpoint.tokensRejected(this.keys, this.credentials);
      this.backoff.tokenAccepted();
    }
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
    const blocked = this.backoff.blocked();
    if (blocked) throw blocked;
    const credentials = this.credentials;
    const renewed = await this.join('renew', rejected);
    // Only a token the endpoint just issued is evidence when refused in turn; one adopted from the store may be as
    // old as the refused one (a missed notification) and gets a renewal of its own. One renewed while the credentials
    // changed is no evidence of the new ones' (their refusal would start a fleet-wide backoff on a correct rotation).
    this.renewedToken =
      renewed.source === 'upstream' && this.stillCurrent(credentials) ? renewed.value : undefined;
    return this.counted(renewed);
  }

  accepted(): void {
    if (this.renewedToken === undefined && !this.backoff.rejectingTokens) return;
    this.renewedToken = undefined;
    if (!this.backoff.rejectingTokens) return;
    this.backoff.tokenAccepted();
    void this.cache.clearRejectedTokens(this.keys);
  }

  status(): TokenStatus {
    return {
      hasValidToken: this.pair !== undefined && this.clock.now() < this.pair.accessExpiresAt,
      lastFailure: this.backoff.lastFailure,
      storeHealthy: this.cache.healthy(),
      accessExpiresAt: this.pair?.accessExpiresAt,
    };
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.unsubscribeChannel = this.store.subscribe(this.keys.channel, this.onNotification);
    // A warm fleet: adopt the shared pair now rather than on the first request.
    await this.adoptFromStore();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.refresher.cancel();
    this.unsubscribeChannel?.();
    this.unsubscribeChannel = undefined;
    this.unsubscribeCredentials?.();
    this.unsubscribeCredentials = undefined;
    await this.lock.stop();
  }

  // --- the single flight -------------------------------------------------------------------------------------

  /**
   * Concurrent needs inside this replica share one promise. A flight the credentials changed under before it called
   * the token endpoint hands its callers to the current credentials' flight (after it let go of the fleet lock).
   */
  private join(kind: FlightKind, rejected?: string): Promise<AccessToken> {
    if (!this.flight) {
      const flight = this.fly(kind, rejected)
        .catch((error: unknown) => {
          if (error !== SUPERSEDED) throw error;
          return this.join('need');
        })
        .finally(() => {
          if (this.flight === flight) this.flight = undefined;
        });
      this.flight = flight;
    }
    return this.flight;
  }

  /** The lock holder re-reads the store first: a refresh token another replica just spent is never reused. */
  private async fly(kind: FlightKind, rejected?: string): Promise<AccessToken> {
    const credentials = this.credentials;
    const keys = this.keys;
    const trigger = this.pair;
    const context = { kind, credentials: credentials.fingerprint, trigger, rejected };
    const accept = (pair: TokenPair | undefined): pair is TokenPair =>
      endsFlight(context, pair, () => this.clock.now(), this.marginMs);
    let latest = trigger?.credentials === credentials.fingerprint ? trigger : undefined;

    const shared = await this.tracing.inSpan(
      'token.store.read',
      () => this.cache.read(keys, rejected),
      storeReadAttributes,
    );
    if (shared !== DOWN) {
      if (accept(shared.pair)) return this.adopt(shared.pair, 'redis');
      latest = newest(latest, shared.pair, credentials.fingerprint);
      this.backoff.throwIfBlocked(shared);
      const token = await this.lock.withFleetLock({
        keys,
        credentials,
        current: () => this.stillCurrent(credentials),
        accept,
        adopt: (pair) => this.adopt(pair, 'redis'),
        asHolder: async () => {
          const again = await this.cache.read(keys, rejected);
          if (again !== DOWN) {
            if (accept(again.pair)) return this.adopt(again.pair, 'redis');
            this.backoff.throwIfBlocked(again);
          }
          const fresher = again === DOWN ? latest : newest(latest, again.pair, credentials.fingerprint);
          this.logger.debug({ event: 'token.lock', result: 'acquired', kind }, 'token lock acquired');
          return await this.fetchAndShare(keys, credentials, fresher, again === DOWN ? undefined : again);
        },
      });
      if (token) return token;
      if (this.stopped) throw new GatewayError('UPSTREAM_UNAVAILABLE', 'The gateway is shutting down.');
      // The proactive refresh never forces its way past a busy lock while the current token still serves.
      if (kind === 'refresh' && this.pair && this.clock.now() < this.usableUntil)
        return tokenOf(this.pair, 'memory');
    }
    return this.fetchAndShare(keys, credentials, latest);
  }

  /** `seen`: the store as the lock holder read it just before, when it answered. */
  private async fetchAndShare(
    keys: TokenKeys,
    credentials: Credentials,
    base?: TokenPair,
    seen?: SharedState,
  ): Promise<AccessToken> {
    // Never a login or refresh with credentials retired while the flight waited (the store, the lock): the provider
    // may refuse them already, and their pair would serve nobody.
    if (!this.stillCurrent(credentials)) throw SUPERSEDED;
    const pair = await this.endpoint.fetch(keys, credentials, base);
    const token = this.adopt(pair, 'upstream');
    // A pair of credentials retired while the call was out is its own callers' alone: after a password change (the
    // same key) it would take the new pair's place in the store, and every replica would log in again.
    if (this.stillCurrent(credentials)) await this.cache.write(keys, pair, seen);
    return token;
  }

  /**
   * Whether credentials a flight started with are the account's now: compared by fingerprint, so a change and a change
   * back while a call was out (A, B, A again) leaves its pair as the current credentials' (in memory and the store).
   */
  private stillCurrent(credentials: Credentials): boolean {
    return credentials.fingerprint === this.credentials.fingerprint;
  }

  // --- memory ---------------------------------------------------------------------------------------------------

  private adopt(pair: TokenPair, source: TokenSource): AccessToken {
    // A flight that started before a credential change must not bring the old credentials' pair back.
    if (pair.credentials === this.credentials.fingerprint && !this.stopped) {
      this.pair = pair;
      this.usableUntil = pair.accessExpiresAt - this.marginMs;
      this.memo = Promise.resolve(tokenOf(pair, 'memory'));
      this.backoff.succeeded();
      this.refresher.schedule();
    }
    return tokenOf(pair, source);
  }

  private readonly counted = (token: AccessToken): AccessToken => {
    this.metrics.tokenSource.inc({ source: token.source });
    return token;
  };

  private dropMemory(): void {
    this.pair = undefined;
    this.memo = undefined;
    this.usableUntil = 0;
    this.refresher.cancel();
  }

  // --- change notifications -------------------------------------------------------------------------------------

  private readonly onNotification = (message: string): void => {
    if (message === NOTIFY_RELEASED) this.lock.released();
    else this.lock.wake();
    if (!this.flight && (message === NOTIFY_PAIR || message === NOTIFY_REFUSED)) void this.adoptFromStore();
  };

  /** Another replica wrote a pair (or a refusal): take it when it is newer than ours. */
  private async adoptFromStore(): Promise<void> {
    if (this.rereading || this.stopped) return;
    this.rereading = true;
    try {
      const credentials = this.credentials;
      const shared = await this.cache.read(this.keys);
      if (shared === DOWN) return;
      const pair = shared.pair;
      if (replaces(pair, this.pair, credentials.fingerprint, this.clock.now(), this.marginMs)) {
        this.adopt(pair, 'redis');
        this.logger.debug({ event: 'token.adopt' }, 'adopted the pair another replica obtained');
      } else {
        this.backoff.observe(shared);
      }
    } finally {
      this.rereading = false;
    }
  }

  // --- credential rotation -------------------------------------------------------------------------------------

  private keysFor(credentials: Credentials): TokenKeys {
    return tokenKeys(this.settings.keyPrefix, this.settings.upstreamBaseUrl, credentials.username);
  }

  /**
   * Tokens of the old credentials are dropped; the backoff of the old credentials ends. A flight still out under the
   * old ones is left to its callers: those who ask from now on start one of their own, so nobody after the change is
   * handed the previous merchant's token (the old flight's own end leaves the new one in place: join()).
   */
  private onCredentialsChange(next: Credentials): void {
    const previous = this.keys;
    this.credentials = next;
    this.keys = this.keysFor(next);
    this.flight = undefined;
    // A token renewed under the old credentials says nothing of the new ones: its refusal is no streak of theirs.
    this.renewedToken = undefined;
    this.dropMemory();
    this.backoff.credentialsChanged(next.fingerprint);
    // A flight waiting on the fleet lock under the old credentials ends its wait now and hands over.
    this.lock.wake();
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
