// The token pair as the fleet shares it in the store: keys, sealed encoding, and guarded store access.
import type { Logger } from 'pino';
import type { TokenKeys } from '../../keys/redis-keys';
import type { Metrics } from '../../observability/metrics';
import type { Clock } from './clock';
import {
  type BackoffRecord,
  decodeFailure,
  encodeFailure,
  type FailureKind,
  type SharedFailures,
} from './login-backoff';
import type { RecordSeal } from './record-seal';
import { SlowStoreGate } from './slow-store-gate';
import type { TokenPair } from './token-pair';
import type { StoreHealthReport, TokenStore } from './token-store';

export interface SharedState extends SharedFailures {
  readonly pair?: TokenPair;
  /** The refusal as stored, to delete only if unchanged since this read. */
  readonly storedRefusal?: StoredRefusal;
}

/** A refusal record as read: `record` is undefined when it does not open (a forgery: nothing to keep). */
interface StoredRefusal {
  readonly raw: string;
  readonly record?: BackoffRecord;
}

/** A store call that failed (or was skipped while the store is down). */
export const DOWN = Symbol('store down');
export type Down = typeof DOWN;

/**
 * Messages on the change channel: a new pair, a refusal that starts the fleet's backoff, or the fleet lock let go of
 * (its holder may have shared nothing: a pair of credentials retired meanwhile, a failed call).
 */
export const NOTIFY_PAIR = 'pair';
export const NOTIFY_REFUSED = 'refused';
export const NOTIFY_RELEASED = 'released';

export interface SharedTokenCacheDeps {
  readonly store: TokenStore;
  readonly seal: RecordSeal;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'storeErrors'>;
  readonly storeRetryMs: number;
  /** Told of failed and recovered store calls: it alone judges and reports Redis health. */
  readonly health?: StoreHealthReport;
}

export class SharedTokenCache {
  private readonly store: TokenStore;
  private readonly seal: RecordSeal;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly metrics: SharedTokenCacheDeps['metrics'];
  /** After a slow failure (a hung Redis) the store is left alone for storeRetryMs. */
  private readonly gate: SlowStoreGate;
  private readonly health?: StoreHealthReport;
  private ok = true;

  constructor(deps: SharedTokenCacheDeps) {
    this.store = deps.store;
    this.seal = deps.seal;
    this.clock = deps.clock;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
    this.gate = new SlowStoreGate(deps.storeRetryMs, () => deps.clock.now());
    this.health = deps.health;
  }

  /** The last store call succeeded and the store answers right now. */
  healthy(): boolean {
    return this.ok && this.store.healthy();
  }

  /**
   * The stored pair and failure records. When `rejected` is the stored access token, that exact stored value is
   * compare-and-deleted: a newer pair written meanwhile by another replica survives.
   */
  async read(keys: TokenKeys, rejected?: string): Promise<SharedState | Down> {
    const values = await this.call('get', () =>
      Promise.all([this.store.get(keys.pair), this.store.get(keys.failure), this.store.get(keys.transient)]),
    );
    if (values === DOWN) return DOWN;
    const [raw, rawRefusal, rawTransient] = values;
    const pair = raw === undefined ? undefined : this.seal.open('token_pair', raw, keys.pair, decodePair);
    if (raw !== undefined && pair === undefined) {
      this.logger.warn(
        { event: 'token.store.unreadable' },
        'the cached token pair cannot be read; ignoring it',
      );
    }
    if (raw !== undefined && pair !== undefined && rejected !== undefined && pair.access === rejected) {
      await this.call('compare_and_delete', () => this.store.compareAndDelete(keys.pair, raw));
    }
    const refusal = this.openFailure('refusal', rawRefusal, keys.failure);
    return {
      pair,
      refusal,
      storedRefusal: rawRefusal === undefined ? undefined : { raw: rawRefusal, record: refusal },
      transient: this.openFailure('transient', rawTransient, keys.transient),
    };
  }

  /**
   * Kept while its refresh token lives; a token obtained ends the fleet's back-offs. `seen` is the lock holder's
   * read just before the token endpoint call: its refusal is not read again.
   */
  async write(keys: TokenKeys, pair: TokenPair, seen?: SharedState): Promise<void> {
    const ttl = pair.refreshExpiresAt - this.clock.now();
    if (ttl <= 0) return;
    const raw = this.seal.seal(JSON.stringify(pair), keys.pair);
    const written = await this.call('set', () => this.store.set(keys.pair, raw, ttl));
    if (written === DOWN) return;
    await this.call('delete', () => this.store.delete(keys.transient));
    // A refusal of other credentials (a rollout with a new password on some replicas) or of the tokens the provider
    // issues stays: this success ends neither. Deleted only if unchanged since read (compare before delete).
    const refusal = seen ? seen.storedRefusal : await this.readRefusal(keys);
    const ended =
      refusal !== undefined &&
      (refusal.record === undefined ||
        (refusal.record.credentials === pair.credentials && !refusal.record.tokenRejected));
    if (ended)
      await this.call('compare_and_delete', () => this.store.compareAndDelete(keys.failure, refusal.raw));
    await this.call('publish', () => this.store.publish(keys.channel, NOTIFY_PAIR));
  }

  /** The provider accepted a call again: a shared streak of rejected tokens is over. */
  async clearRejectedTokens(keys: TokenKeys): Promise<void> {
    const refusal = await this.readRefusal(keys);
    if (refusal?.record?.tokenRejected)
      await this.call('compare_and_delete', () => this.store.compareAndDelete(keys.failure, refusal.raw));
  }

  /** The stored refusal; undefined when there is none or the store did not answer. */
  private async readRefusal(keys: TokenKeys): Promise<StoredRefusal | undefined> {
    const raw = await this.call('get', () => this.store.get(keys.failure));
    if (raw === DOWN || raw === undefined) return undefined;
    return { raw, record: this.openFailure('refusal', raw, keys.failure) };
  }

  /**
   * Shares a failure for `ttlMs` (longer than its wait: the streak outlives the wait, so the next failure waits
   * longer); a refusal is announced so the other replicas stop at once.
   */
  async writeFailure(
    keys: TokenKeys,
    kind: FailureKind,
    record: BackoffRecord,
    ttlMs: number,
  ): Promise<void> {
    const key = kind === 'refusal' ? keys.failure : keys.transient;
    const raw = this.seal.seal(encodeFailure(record), key);
    const written = await this.call('set', () => this.store.set(key, raw, ttlMs));
    if (written !== DOWN && kind === 'refusal')
      await this.call('publish', () => this.store.publish(keys.channel, NOTIFY_REFUSED));
  }

  /** After a slow failure the store is left alone a moment: requests never queue on an unreachable Redis. */
  async call<T>(operation: string, run: () => Promise<T>): Promise<T | Down> {
    if (!this.gate.admits()) return DOWN;
    const started = this.clock.now();
    try {
      const value = await run();
      this.gate.succeeded();
      this.mark(true);
      return value;
    } catch (error) {
      this.gate.failed(started);
      this.metrics.storeErrors.inc({ operation });
      // The outage itself is the Redis-health owner's line; this one names the operation, for debugging.
      this.logger.debug(
        { event: 'token.store.error', operation, error: (error as Error)?.message },
        'token store call failed; served from memory or an own login',
      );
      this.mark(false, error);
      return DOWN;
    }
  }

  private mark(ok: boolean, error?: unknown): void {
    if (ok === this.ok) return;
    this.ok = ok;
    if (ok) this.health?.reportSuccess();
    else this.health?.reportFailure(error, 'token cache');
  }

  private openFailure(kind: FailureKind, raw: string | undefined, key: string): BackoffRecord | undefined {
    if (raw === undefined) return undefined;
    const recordKind = kind === 'refusal' ? 'login_refusal' : 'login_transient';
    const record = this.seal.open(recordKind, raw, key, (text) => decodeFailure(text, kind));
    if (!record)
      this.logger.warn(
        { event: 'token.store.unreadable', kind: recordKind },
        'a shared record cannot be read; ignoring it',
      );
    return record;
  }
}

/** The pair from its JSON text, or undefined when it is not one. */
function decodePair(text: string): TokenPair | undefined {
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
