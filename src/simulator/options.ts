// The simulator's settings, as parsed from SIMULATOR_* variables or handed in by a test or local mode.

export interface SimulatorOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  readonly host: string;
  /** Port to listen on; `0` picks a free ephemeral port. Default `4010`. */
  readonly port: number;
  /** The one credential pair `POST /api/token/` accepts. */
  readonly username: string;
  readonly password: string;
  /**
   * Further merchant accounts, each its own credential pair, user id and tokens (a provider holds many): the
   * stats count each account's logins, refreshes and calls by username, and the request log names whose token a
   * call carried. Set in process (tests, local mode) or by SIMULATOR_EXTRA_ACCOUNTS.
   */
  readonly extraAccounts?: readonly { readonly username: string; readonly password: string }[];
  /** Lifetime of access tokens (the provider's: 5 min). */
  readonly accessTtlSeconds: number;
  /** Lifetime of refresh tokens (the provider's: 24 h). */
  readonly refreshTtlSeconds: number;
  /** Caller IPs the upstream paths answer; empty = everyone. IPv4-mapped IPv6 addresses are normalised. */
  readonly allowedIps: readonly string[];
  /** simplejwt ROTATE_REFRESH_TOKENS + BLACKLIST_AFTER_ROTATION: a refresh returns a new refresh token and retires the old one. */
  readonly rotateRefresh: boolean;
  /** Serve HTTPS with this PEM certificate (chain) and key; absent: plain HTTP. */
  readonly tls?: { readonly cert: string; readonly key: string };
}
