// At most one provider call per Idempotency-Key for the whole fleet (SPEC §13): claim, forward, keep, replay.
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { envelopeOf } from '../../http/error-envelope';
import { GatewayError, secondsToRetry } from '../../http/gateway-error';
import { idempotencyRecordKey } from '../../keys/redis-keys';
import type { RecordSeal } from '../../tokens';
import { requestFingerprint } from './fingerprint';
import { missingIdempotencyKey, readIdempotencyKey } from './idempotency-key';
import { decodeRecord, encodeRecord, type IdempotencyRecord, type KeptAnswer } from './idempotency-record';
import type { IdempotencyStore } from './idempotency-store';

/** What an operation declares (SPEC §12: `idempotency`, `forwardIdempotencyKey`). */
export interface IdempotencyPolicy {
  readonly idempotency: 'none' | 'optional' | 'required';
  /** The provider honours Idempotency-Key itself: the key travels upstream, and an unknown outcome is not kept. */
  readonly forwardIdempotencyKey: boolean;
}

/** The request as the fingerprint sees it: the operation's name, its method and path, the body the caller sent. */
export interface IdempotentRequest {
  readonly operation: string;
  readonly policy: IdempotencyPolicy;
  readonly method: string;
  readonly path: string;
  /** The parsed body as the caller sent it (before sanitizing): its canonical JSON is part of the fingerprint. */
  readonly body?: unknown;
  /** The operation's own timeout (x-gateway.timeoutMs), else the account's: the lease follows it. */
  readonly timeoutMs?: number;
}

/** Forwards the request once; given the key when the operation forwards it upstream. */
export type ForwardOnce = (upstreamKey: string | undefined) => Promise<KeptAnswer>;

export type IdempotencyOutcome =
  | 'claimed'
  | 'replayed'
  | 'in_use'
  | 'reused'
  | 'outcome_unknown'
  | 'unavailable'
  | 'invalid'
  | 'kept'
  | 'released'
  | 'store_failed';

export interface IdempotencyDeps {
  readonly store: IdempotencyStore;
  readonly seal: RecordSeal;
  readonly keyPrefix: string;
  /** IDEMPOTENCY_TTL_SECONDS: how long a claim and a kept answer last. */
  readonly ttlSeconds: number;
  /** How long a claim holds the key for a request of this account before its outcome counts as unknown. */
  readonly leaseMsOf: (accountId: string, operationTimeoutMs?: number) => number;
  readonly count: (operation: string, outcome: IdempotencyOutcome) => void;
  readonly logger: Pick<Logger, 'warn'>;
  readonly now?: () => number;
}

export interface Idempotency {
  /**
   * Runs `forward` unless a repeat of the same key can be answered without it (the kept answer, 409, 422, 504), and
   * keeps what it answered. Without a key (or on an operation declared `none`) it only calls `forward`: no store
   * command. A replay sets `Idempotent-Replayed: true` and `res.locals.replayed`.
   */
  forward(req: Request, res: Response, request: IdempotentRequest, forward: ForwardOnce): Promise<KeptAnswer>;
}

/** Retry-After of 503 IDEMPOTENCY_UNAVAILABLE: a store outage is seldom over in less. */
const UNAVAILABLE_RETRY_SECONDS = 5;
const JSON_TYPE = 'application/json; charset=utf-8';

/** What a repeat of a claimed key is answered, from the record found (pure: the unit tests' table). */
export type RepeatDecision =
  | { readonly kind: 'replay'; readonly answer: KeptAnswer }
  | { readonly kind: 'in_use'; readonly retryAfterSeconds: number }
  | { readonly kind: 'reused' | 'outcome_unknown' | 'unavailable' };

/**
 * `record` is what the store held (undefined: it ended between the claim and the read; null: it did not open). A
 * claim whose lease is over is the outcome of a replica that stopped before keeping an answer: it may have reached
 * the provider, so the request is never sent again under this key.
 */
export function repeatDecision(
  record: IdempotencyRecord | null | undefined,
  fingerprint: string,
  now: number,
): RepeatDecision {
  if (record === undefined) return { kind: 'in_use', retryAfterSeconds: 1 };
  if (record === null) return { kind: 'unavailable' };
  if (record.fingerprint !== fingerprint) return { kind: 'reused' };
  if (record.state === 'kept') return { kind: 'replay', answer: record.answer };
  const left = record.leaseUntil - now;
  return left > 0 ? { kind: 'in_use', retryAfterSeconds: secondsToRetry(left) } : { kind: 'outcome_unknown' };
}

export function createIdempotency(deps: IdempotencyDeps): Idempotency {
  const now = deps.now ?? Date.now;
  return {
    async forward(req, res, request, forward) {
      const { operation, policy } = request;
      if (policy.idempotency === 'none') return forward(undefined);
      let key: string | undefined;
      try {
        key = readIdempotencyKey(req);
        if (key === undefined && policy.idempotency === 'required') throw missingIdempotencyKey();
      } catch (error) {
        deps.count(operation, 'invalid');
        throw error;
      }
      if (key === undefined) return forward(undefined);
      const accountId = req.account?.id ?? 'default';
      const storeKey = idempotencyRecordKey(
        deps.keyPrefix,
        req.caller?.id ?? 'anonymous',
        accountId,
        operation,
        key,
      );
      const keyed = new KeyedRequest(
        deps,
        storeKey,
        operation,
        requestFingerprint(request.method, request.path, request.body),
      );
      const claim = await keyed.claim(now(), deps.leaseMsOf(accountId, request.timeoutMs));
      if (claim !== true) return keyed.answerRepeat(res, claim, now());
      deps.count(operation, 'claimed');
      let answer: KeptAnswer;
      try {
        answer = await forward(policy.forwardIdempotencyKey ? key : undefined);
      } catch (error) {
        throw await keyed.failed(error, res, policy);
      }
      if (answer.status === 429) await keyed.notExecuted();
      else await keyed.keep(answer);
      return answer;
    },
  };
}

/** Gateway reasons that stand for a provider answer refusing the call without executing it (see notExecuted). */
const PROVIDER_REFUSALS: ReadonlySet<string> = new Set([
  'UPSTREAM_AUTH_FAILED',
  'UPSTREAM_IP_NOT_WHITELISTED',
]);

/** One keyed request: its record's name in the store and its fingerprint, from the claim to the answer kept. */
class KeyedRequest {
  constructor(
    private readonly deps: IdempotencyDeps,
    private readonly storeKey: string,
    private readonly operation: string,
    private readonly fingerprint: string,
  ) {}

  /**
   * true: claimed; otherwise the record found (undefined: gone in between). The store failing: 503. The claim lives
   * for its lease and then the TTL: a lease longer than IDEMPOTENCY_TTL_SECONDS (long timeouts, a short TTL) must not
   * let the record vanish while the request is still out (a repeat would be forwarded again), and after the lease a
   * repeat is told the outcome is unknown for a whole TTL.
   */
  async claim(now: number, leaseMs: number): Promise<true | string | undefined> {
    const record = this.seal({ state: 'claimed', fingerprint: this.fingerprint, leaseUntil: now + leaseMs });
    try {
      const result = await this.deps.store.claim(
        this.storeKey,
        record,
        leaseMs + this.deps.ttlSeconds * 1000,
      );
      return result.claimed ? true : result.existing;
    } catch {
      this.deps.count(this.operation, 'unavailable');
      throw unavailable();
    }
  }

  /** A repeat: the kept answer (Idempotent-Replayed: true), or the refusal the record calls for. */
  answerRepeat(res: Response, existing: string | undefined, now: number): KeptAnswer {
    const record =
      existing === undefined
        ? undefined
        : (this.deps.seal.open('idempotency', existing, this.storeKey, decodeRecord) ?? null);
    const decision = repeatDecision(record, this.fingerprint, now);
    this.deps.count(this.operation, decision.kind === 'replay' ? 'replayed' : decision.kind);
    switch (decision.kind) {
      case 'replay':
        res.locals.replayed = true;
        res.setHeader('idempotent-replayed', 'true');
        return decision.answer;
      case 'in_use':
        throw inUse(decision.retryAfterSeconds);
      case 'reused':
        throw new GatewayError(
          'IDEMPOTENCY_KEY_REUSED',
          'This Idempotency-Key was used with another request; use a new key for a new request.',
        );
      case 'outcome_unknown':
        throw outcomeUnknown();
      case 'unavailable':
        // Unreadable (tampered, sealed with another key, another type): nothing can be promised about this key.
        throw unavailable();
    }
  }

  /** What a failed forward leaves (returned, to be thrown): the provider's answer or an unknown outcome kept, or the
   * key released. */
  async failed(error: unknown, res: Response, policy: IdempotencyPolicy): Promise<unknown> {
    if (!(error instanceof GatewayError)) {
      await this.release();
      return error;
    }
    if (res.locals.upstreamAnswered === true && PROVIDER_REFUSALS.has(error.reason)) {
      await this.notExecuted();
      return error;
    }
    if (res.locals.upstreamAnswered === true) {
      // The provider answered (a 5xx), and the gateway's envelope says so: kept as sent.
      await this.keep(envelopeAnswer(error, res));
      return error;
    }
    if (res.locals.upstreamUnknown === true && !policy.forwardIdempotencyKey) {
      const unknown = outcomeUnknown();
      this.deps.count(this.operation, 'outcome_unknown');
      await this.keep(envelopeAnswer(unknown, res));
      return unknown;
    }
    // Refused before it was sent (budget, quota, circuit, saturation, a token), or the provider dedupes the key
    // itself: nothing is kept, a retry may be forwarded.
    await this.release();
    return error;
  }

  /**
   * The provider refused the call without executing it (429: slow down; 403: the egress IP; a second 401: the
   * credentials): the claim is released, not kept, so the caller's retry after the Retry-After, or after the operator's
   * fix, is forwarded. Kept for the key's TTL, such an answer would make the key useless (Stripe keeps no result for a
   * request that did not start executing). These are the answers the default billable set excludes for the same reason.
   */
  notExecuted(): Promise<void> {
    return this.release();
  }

  keep(answer: KeptAnswer): Promise<void> {
    const record = this.seal({ state: 'kept', fingerprint: this.fingerprint, answer });
    return this.settle('kept', () =>
      this.deps.store.keep(this.storeKey, record, this.deps.ttlSeconds * 1000),
    );
  }

  private release(): Promise<void> {
    return this.settle('released', () => this.deps.store.release(this.storeKey));
  }

  private seal(record: IdempotencyRecord): string {
    return this.deps.seal.seal(encodeRecord(record), this.storeKey);
  }

  private async settle(what: 'kept' | 'released', write: () => Promise<void>): Promise<void> {
    try {
      await write();
      this.deps.count(this.operation, what);
    } catch (error) {
      // The claim stays until its lease ends; a repeat then gets the unknown outcome: never a second call.
      this.deps.count(this.operation, 'store_failed');
      this.deps.logger.warn(
        { operation: this.operation, err: (error as Error)?.message },
        `idempotency: the claim could not be ${what === 'kept' ? 'replaced by its answer' : 'released'}; repeats get 409, then 504 after the lease`,
      );
    }
  }
}

/** The error envelope exactly as the error handler will write it (sendError): the bytes a replay repeats. */
function envelopeAnswer(error: GatewayError, res: Response): KeptAnswer {
  const body = Buffer.from(JSON.stringify(envelopeOf(error, String(res.getHeader('x-request-id') ?? ''))));
  return { status: error.status, headers: { 'content-type': JSON_TYPE, ...error.headers }, body };
}

function inUse(retryAfterSeconds: number): GatewayError {
  return new GatewayError(
    'IDEMPOTENCY_KEY_IN_USE',
    'A request with this Idempotency-Key is still being answered; retry after the Retry-After seconds.',
    { headers: { 'retry-after': String(retryAfterSeconds) } },
  );
}

function unavailable(): GatewayError {
  return new GatewayError(
    'IDEMPOTENCY_UNAVAILABLE',
    'The gateway cannot reach the store of Idempotency-Keys now, so it cannot promise to forward this request once; retry after the Retry-After seconds (or send it without a key).',
    { headers: { 'retry-after': String(UNAVAILABLE_RETRY_SECONDS) } },
  );
}

function outcomeUnknown(): GatewayError {
  return new GatewayError(
    'UPSTREAM_OUTCOME_UNKNOWN',
    'The request reached the provider but its answer was lost; it is not sent again under this Idempotency-Key. Check its effect before retrying with a new key.',
  );
}
