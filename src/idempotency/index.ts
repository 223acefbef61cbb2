// Idempotency keys (SPEC §13): the public surface of src/idempotency/. The request path asks `forward` once per
// request of an operation; what the operation declares (the catalogue's `idempotency`, `forwardIdempotencyKey`) comes
// in as its IdempotencyPolicy.
import type { Logger } from 'pino';
import type { Metrics } from '../observability/metrics';
import type { RedisClient } from '../store/redis-connection';
import type { RecordSeal } from '../tokens';
import { memoryIdempotencyStore, redisIdempotencyStore } from './internal/idempotency-store';
import { createIdempotency, type Idempotency } from './internal/idempotent-forwarding';

export { canonicalJson, requestFingerprint } from './internal/fingerprint';
export { IDEMPOTENCY_KEY_HEADER, readIdempotencyKey } from './internal/idempotency-key';
export type { KeptAnswer } from './internal/idempotency-record';
export type { IdempotencyStore } from './internal/idempotency-store';
export {
  createIdempotency,
  type ForwardOnce,
  type Idempotency,
  type IdempotencyDeps,
  type IdempotencyOutcome,
  type IdempotencyPolicy,
  type IdempotentRequest,
  type RepeatDecision,
  repeatDecision,
} from './internal/idempotent-forwarding';
export { memoryIdempotencyStore, redisIdempotencyStore };

/** The answer header of a replay. */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

/**
 * Beyond the longest a claimed request can take to be answered (its attempts' timeouts): the waits for a token, a
 * socket and budget before it, and the time to keep the answer after.
 */
export const LEASE_MARGIN_MS = 2_000;

export interface IdempotencyOptions {
  /** The shared Redis; absent in local mode: the records live in this process. */
  readonly redis?: RedisClient;
  readonly seal: RecordSeal;
  readonly keyPrefix: string;
  readonly ttlSeconds: number;
  /** The longest one forwarded request of this account can take before the forwarder gives up. */
  readonly forwardLimitMsOf: (accountId: string, operationTimeoutMs?: number) => number;
  readonly metrics: Pick<Metrics, 'idempotency'>;
  readonly logger: Pick<Logger, 'warn'>;
}

/** The gateway's idempotency over its shared store (one per replica). */
export function buildIdempotency(options: IdempotencyOptions): Idempotency {
  return createIdempotency({
    store: options.redis ? redisIdempotencyStore(options.redis) : memoryIdempotencyStore(),
    seal: options.seal,
    keyPrefix: options.keyPrefix,
    ttlSeconds: options.ttlSeconds,
    leaseMsOf: (accountId, operationTimeoutMs) =>
      options.forwardLimitMsOf(accountId, operationTimeoutMs) + LEASE_MARGIN_MS,
    count: (operation, outcome) => options.metrics.idempotency.inc({ operation, outcome }),
    logger: options.logger,
  });
}
