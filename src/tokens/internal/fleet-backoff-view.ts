// The fleet's login back-off for one account's credentials, seen from outside a replica (the doctor): read through
// the token manager's own store code and records, and a refusal seen outside shared as a replica would share it.
import type { Logger } from 'pino';
import { tokenKeys } from '../../keys/redis-keys';
import type { Metrics } from '../../observability/metrics';
import { type Clock, systemClock } from './clock';
import type { Credentials } from './credentials';
import {
  type BackoffRecord,
  LOGIN_MAX_INTERVAL_DEFAULT_MS,
  LoginBackoff,
  type RefusalReason,
  TRANSIENT_DEFAULTS,
} from './login-backoff';
import type { RecordSeal } from './record-seal';
import { DOWN, SharedTokenCache } from './shared-token-cache';
import { STREAK_MEMORY_MS } from './token-endpoint';
import type { TokenStore } from './token-store';

/** What the fleet would do about a login with these credentials right now. */
export type FleetBackoffState =
  /** The store did not answer: the back-off cannot be known (each replica may be backing off on its own). */
  | { readonly kind: 'unknown' }
  /** No back-off: the fleet would log in. `lastRefusal`: a refusal of these credentials whose wait is over. */
  | {
      readonly kind: 'clear';
      readonly lastRefusal?: BackoffRecord;
      /** A refusal of other credentials (before a rotation) is on record: these start clean. */
      readonly otherCredentialsRefused: boolean;
    }
  /** The fleet logs in again only after `remainingMs`: `cause` says which back-off, `record` its last failure. */
  | {
      readonly kind: 'backing-off';
      readonly cause: 'refusal' | 'transient';
      readonly remainingMs: number;
      readonly record: BackoffRecord;
    };

export interface FleetBackoffView {
  read(): Promise<FleetBackoffState>;
  /**
   * Shares a refusal seen outside the fleet (the doctor's own login) exactly as a replica does: the next step of
   * the streak, for the fleet and the next doctor run. The record shared; undefined when the store did not take
   * it (or the back-off is off).
   */
  shareRefusal(reason: RefusalReason): Promise<BackoffRecord | undefined>;
}

export interface FleetBackoffViewDeps {
  readonly store: TokenStore;
  readonly seal: RecordSeal;
  /** The account's credentials, fingerprinted as the gateway does (the key derived from TOKEN_ENCRYPTION_KEY). */
  readonly credentials: Credentials;
  readonly logger: Logger;
  readonly settings: {
    readonly upstreamBaseUrl: string;
    readonly keyPrefix: string;
    readonly loginMinIntervalMs: number;
    readonly loginMaxIntervalMs?: number;
  };
  readonly clock?: Clock;
}

/** A view is only read once or twice (a doctor run): store errors are the caller's verdict, not a metric. */
const UNCOUNTED: Pick<Metrics, 'storeErrors'> = {
  storeErrors: { inc: () => undefined },
} as unknown as Pick<Metrics, 'storeErrors'>;

export function createFleetBackoffView(deps: FleetBackoffViewDeps): FleetBackoffView {
  const { credentials, settings } = deps;
  const clock = deps.clock ?? systemClock;
  const keys = tokenKeys(settings.keyPrefix, settings.upstreamBaseUrl, credentials.username);
  const cache = new SharedTokenCache({
    store: deps.store,
    seal: deps.seal,
    clock,
    logger: deps.logger,
    metrics: UNCOUNTED,
    storeRetryMs: 0,
  });
  // The token manager's own policy: the record is read and capped exactly as a replica reads it.
  const backoff = new LoginBackoff(credentials.fingerprint, () => clock.now(), Math.random, {
    loginMinIntervalMs: settings.loginMinIntervalMs,
    loginMaxIntervalMs: Math.max(
      settings.loginMinIntervalMs,
      settings.loginMaxIntervalMs ?? LOGIN_MAX_INTERVAL_DEFAULT_MS,
    ),
    ...TRANSIENT_DEFAULTS,
  });

  return {
    async read() {
      const shared = await cache.read(keys);
      if (shared === DOWN) return { kind: 'unknown' };
      backoff.observe(shared);
      const left = backoff.remainingByKind();
      const { refusal, transient } = backoff.records;
      if (left.refusal > 0 && refusal)
        return { kind: 'backing-off', cause: 'refusal', remainingMs: left.refusal, record: refusal };
      if (left.transient > 0 && transient)
        return { kind: 'backing-off', cause: 'transient', remainingMs: left.transient, record: transient };
      return {
        kind: 'clear',
        lastRefusal: refusal,
        otherCredentialsRefused:
          shared.refusal !== undefined && shared.refusal.credentials !== credentials.fingerprint,
      };
    },
    async shareRefusal(reason) {
      // Re-read first, as a lock holder does: the streak continues from the fleet's latest record, never restarts.
      const shared = await cache.read(keys);
      if (shared !== DOWN) backoff.observe(shared);
      const record = backoff.refused(reason);
      if (!record || record.waitMs <= 0) return undefined;
      await cache.writeFailure(keys, 'refusal', record, record.waitMs + STREAK_MEMORY_MS.refusal);
      return cache.healthy() ? record : undefined;
    },
  };
}
