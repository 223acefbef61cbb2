// Fleet-wide backoff after the upstream refused the gateway (credentials 401, IP 403): protects the account.
import { GatewayError, isGatewayError } from '../http/gateway-error';

export type RefusalReason = 'UPSTREAM_AUTH_FAILED' | 'UPSTREAM_IP_NOT_WHITELISTED';

/** The last refusal, kept in memory and in the store next to the pair (no secret in it). */
export interface Refusal {
  readonly reason: RefusalReason;
  /** Epoch milliseconds of the refused call. */
  readonly at: number;
  /** Fingerprint of the credentials that were refused: a credential change ends the backoff. */
  readonly credentials: string;
}

export function isRefusal(error: unknown): error is GatewayError & { reason: RefusalReason } {
  return (
    error instanceof GatewayError &&
    (error.reason === 'UPSTREAM_AUTH_FAILED' || error.reason === 'UPSTREAM_IP_NOT_WHITELISTED')
  );
}

export function encodeRefusal(refusal: Refusal): string {
  return JSON.stringify(refusal);
}

export function decodeRefusal(raw: string | undefined): Refusal | undefined {
  if (!raw) return undefined;
  try {
    const value = JSON.parse(raw) as Partial<Refusal>;
    if (
      (value.reason === 'UPSTREAM_AUTH_FAILED' || value.reason === 'UPSTREAM_IP_NOT_WHITELISTED') &&
      typeof value.at === 'number' &&
      typeof value.credentials === 'string'
    ) {
      return { reason: value.reason, at: value.at, credentials: value.credentials };
    }
  } catch {
    // unreadable: no backoff
  }
  return undefined;
}

/** Milliseconds the fleet must still wait before the next login attempt (0 when it may try). */
export function backoffRemaining(
  refusal: Refusal | undefined,
  credentials: string,
  now: number,
  minIntervalMs: number,
): number {
  if (!refusal || refusal.credentials !== credentials) return 0;
  return Math.max(0, refusal.at + minIntervalMs - now);
}

const DETAIL: Record<RefusalReason, string> = {
  UPSTREAM_AUTH_FAILED:
    'The upstream refused the gateway credentials (check UPSTREAM_USERNAME / UPSTREAM_PASSWORD); retrying later.',
  UPSTREAM_IP_NOT_WHITELISTED:
    "The upstream refused the gateway's IP address: ask the provider to whitelist the gateway's egress IP.",
};

/** The error every caller gets, without an upstream call, while the backoff lasts. */
export function refusalError(reason: RefusalReason, remainingMs: number): GatewayError {
  return new GatewayError(reason, DETAIL[reason], {
    headers: { 'Retry-After': String(Math.max(1, Math.ceil(remainingMs / 1000))) },
  });
}

/**
 * The refusal this replica knows of (its own or the fleet's) and the last token-endpoint failure it reports.
 * It belongs to the current credentials: a change of credentials starts clean.
 */
export class LoginBackoff {
  private refusal?: Refusal;
  private failure?: string;

  constructor(
    private fingerprint: string,
    private readonly now: () => number,
    private readonly minIntervalMs: number,
  ) {}

  /** The reason of the last failure until a success (or new credentials) clears it. */
  get lastFailure(): string | undefined {
    return this.failure;
  }

  /** Remembers a failed call; answers the error so it can be thrown on. */
  failed(error: unknown): unknown {
    this.failure = isGatewayError(error) ? error.reason : 'UPSTREAM_UNAVAILABLE';
    return error;
  }

  refused(refusal: Refusal): void {
    this.refusal = refusal;
    this.failure = refusal.reason;
  }

  /** A token was obtained: nothing to back off from. */
  clear(): void {
    this.refusal = undefined;
    this.failure = undefined;
  }

  credentialsChanged(fingerprint: string): void {
    this.fingerprint = fingerprint;
    this.clear();
  }

  /** Milliseconds before the current credentials may be tried again. */
  remaining(): number {
    return this.left(this.refusal, this.fingerprint);
  }

  /** The error to answer without an upstream call while the backoff of the current credentials lasts. */
  blocked(): GatewayError | undefined {
    const refusal = this.refusal;
    if (!refusal) return undefined;
    const left = this.left(refusal, this.fingerprint);
    return left > 0 ? refusalError(refusal.reason, left) : undefined;
  }

  /** Takes over a refusal another replica shared, while it still runs for `fingerprint`. */
  adopt(refusal: Refusal | undefined, fingerprint: string): void {
    if (refusal && this.left(refusal, fingerprint) > 0) this.refused(refusal);
  }

  /** As adopt, and throws the refusal to the callers of this flight. */
  throwIfRefused(refusal: Refusal | undefined, fingerprint: string): void {
    const left = this.left(refusal, fingerprint);
    if (!refusal || left <= 0) return;
    this.refused(refusal);
    throw refusalError(refusal.reason, left);
  }

  private left(refusal: Refusal | undefined, fingerprint: string): number {
    return backoffRemaining(refusal, fingerprint, this.now(), this.minIntervalMs);
  }
}
