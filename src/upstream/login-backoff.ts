// Fleet-wide backoff after the upstream refused the gateway (credentials 401, IP 403): protects the account.
import { GatewayError } from '../http/gateway-error';

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
