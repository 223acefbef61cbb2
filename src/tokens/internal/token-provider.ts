// The narrow seam between forwarding and token management: the proxy asks for a token and reports a rejection.
export type TokenSource = 'memory' | 'redis' | 'upstream';

export interface AccessToken {
  /** The upstream JWT. Never log it, never answer it. */
  readonly value: string;
  /** Epoch milliseconds, from the JWT `exp` claim (or the 300 s fallback). */
  readonly expiresAt: number;
  /** Where this replica got it for this request: its memory, the shared store, or a token endpoint call. */
  readonly source: TokenSource;
}

export interface TokenStatus {
  /** A token that is valid now is held in memory. */
  readonly hasValidToken: boolean;
  /** The last token-endpoint failure reason (e.g. UPSTREAM_AUTH_FAILED) until a success clears it. */
  readonly lastFailure?: string;
  /** The shared store answers (always true for the memory store). */
  readonly storeHealthy: boolean;
  /** Epoch milliseconds when the access token held in memory expires; absent when none is held. */
  readonly accessExpiresAt?: number;
}

export interface TokenProvider {
  /**
   * A valid upstream access token. Answers from memory while the token is valid (no I/O); otherwise concurrent
   * callers share one fetch. Rejects with a GatewayError (UPSTREAM_AUTH_FAILED, UPSTREAM_IP_NOT_WHITELISTED,
   * UPSTREAM_UNAVAILABLE, UPSTREAM_TIMEOUT).
   */
  getAccessToken(): Promise<AccessToken>;
  /**
   * The upstream answered 401 to a call made with `rejected`: drop that exact token (compare before delete, so a
   * newer one written by another replica survives) and get a fresh one through the same single flight.
   */
  renewAfterRejection(rejected: string): Promise<AccessToken>;
  /** The provider answered a call made with a token without a 401 (ends a streak of rejected tokens). */
  accepted?(): void;
  status(): TokenStatus;
  /** Starts background refresh (before expiry) and store change notifications. */
  start(): Promise<void>;
  /** Stops timers and subscriptions and releases any lock this replica holds. */
  stop(): Promise<void>;
}
