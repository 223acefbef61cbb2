// The one error type of the gateway: a reason of the error catalogue, its HTTP status and a human detail.
export const REASON_STATUS = {
  INVALID_REQUEST: 400,
  CLIENT_UNAUTHENTICATED: 401,
  CLIENT_FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  /** More header fields than MAX_HEADER_FIELDS (protocol-errors.ts), or headers too large for Node's parser. */
  REQUEST_HEADERS_TOO_LARGE: 431,
  /** A request with this Idempotency-Key is still being forwarded (SPEC §13): retry after Retry-After. */
  IDEMPOTENCY_KEY_IN_USE: 409,
  /** This Idempotency-Key was used with another request (method, path or body) (SPEC §13). */
  IDEMPOTENCY_KEY_REUSED: 422,
  RATE_LIMITED: 429,
  /** The client's day or month quota of billable provider calls on this account is used up (SPEC §11). */
  QUOTA_EXCEEDED: 429,
  /** The account's provider budget had no room within UPSTREAM_BUDGET_WAIT_MS (SPEC §11): never sent. */
  UPSTREAM_BUDGET_EXHAUSTED: 429,
  INTERNAL_ERROR: 500,
  UPSTREAM_AUTH_FAILED: 502,
  UPSTREAM_IP_NOT_WHITELISTED: 502,
  UPSTREAM_UNAVAILABLE: 502,
  UPSTREAM_SATURATED: 503,
  /** The shared store of Idempotency-Keys cannot be reached: a keyed request cannot be promised once (SPEC §13). */
  IDEMPOTENCY_UNAVAILABLE: 503,
  /** The provider answered 429 with Retry-After: the account is paused fleet-wide until then (SPEC §11). */
  UPSTREAM_RATE_LIMITED: 503,
  UPSTREAM_TIMEOUT: 504,
  /** A keyed request reached the provider and its answer was lost (timeout, connection cut, replica gone) (SPEC §13). */
  UPSTREAM_OUTCOME_UNKNOWN: 504,
} as const;

export type ErrorReason = keyof typeof REASON_STATUS;

export interface FieldError {
  readonly path: string;
  readonly message: string;
}

export interface GatewayErrorOptions {
  /** Overrides the reason's default status (UPSTREAM_UNAVAILABLE is 503 while the circuit is open). */
  readonly status?: number;
  readonly errors?: readonly FieldError[];
  /** Extra answer headers, e.g. Retry-After or Allow. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly cause?: unknown;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly errors?: readonly FieldError[];
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    readonly reason: ErrorReason,
    readonly detail: string,
    options: GatewayErrorOptions = {},
  ) {
    super(`${reason}: ${detail}`, { cause: options.cause });
    this.name = 'GatewayError';
    this.status = options.status ?? REASON_STATUS[reason];
    this.errors = options.errors;
    this.headers = options.headers ?? {};
  }
}

export function isGatewayError(value: unknown): value is GatewayError {
  return value instanceof GatewayError;
}

/** The Retry-After of a wait of `ms` milliseconds: whole seconds, rounded up, at least 1. */
export function secondsToRetry(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
