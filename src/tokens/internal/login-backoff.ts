// Fleet-wide back-offs of the token endpoints: a long one after refusals (401/403), a short one after transient failures.
import { type ErrorReason, GatewayError, isGatewayError, secondsToRetry } from '../../http/gateway-error';
import { type BackoffPolicy, type BackoffRecord, BackoffTrack } from './backoff-track';

export type { BackoffRecord } from './backoff-track';

export type RefusalReason = 'UPSTREAM_AUTH_FAILED' | 'UPSTREAM_IP_NOT_WHITELISTED';
const REFUSAL_REASONS: readonly string[] = ['UPSTREAM_AUTH_FAILED', 'UPSTREAM_IP_NOT_WHITELISTED'];
const TRANSIENT_REASONS: readonly string[] = ['UPSTREAM_UNAVAILABLE', 'UPSTREAM_TIMEOUT'];

/** The two kinds of shared failure record. */
export type FailureKind = 'refusal' | 'transient';

/** The failure records read from the store (absent, or ignored when they did not open). */
export interface SharedFailures {
  readonly refusal?: BackoffRecord;
  readonly transient?: BackoffRecord;
}

export interface LoginBackoffSettings {
  /** TOKEN_LOGIN_MIN_INTERVAL_MS. */
  readonly loginMinIntervalMs: number;
  /** TOKEN_LOGIN_MAX_INTERVAL_MS. */
  readonly loginMaxIntervalMs: number;
  readonly transientMinMs: number;
  readonly transientMaxMs: number;
}

/** The transient back-off when the settings do not say (the token manager's and the doctor's reading of it). */
export const TRANSIENT_DEFAULTS = { transientMinMs: 1_000, transientMaxMs: 30_000 } as const;

/** TOKEN_LOGIN_MAX_INTERVAL_MS when the settings do not say (never below the minimum). */
export const LOGIN_MAX_INTERVAL_DEFAULT_MS = 900_000;

export function isRefusal(error: unknown): error is GatewayError & { reason: RefusalReason } {
  return isGatewayError(error) && REFUSAL_REASONS.includes(error.reason);
}

export function encodeFailure(record: BackoffRecord): string {
  return JSON.stringify(record);
}

/** A record of `kind` from its JSON text, or undefined when it is not one (never a throw). */
export function decodeFailure(text: string, kind: FailureKind): BackoffRecord | undefined {
  try {
    const value = JSON.parse(text) as Partial<BackoffRecord>;
    const reasons = kind === 'refusal' ? REFUSAL_REASONS : TRANSIENT_REASONS;
    if (
      typeof value.reason === 'string' &&
      reasons.includes(value.reason) &&
      Number.isFinite(value.at) &&
      Number.isFinite(value.waitMs) &&
      Number.isFinite(value.streak) &&
      (kind === 'transient' || typeof value.credentials === 'string')
    ) {
      const { reason, at, waitMs, streak, credentials } = value as BackoffRecord;
      return {
        reason,
        at,
        waitMs,
        streak,
        credentials,
        ...(value.tokenRejected === true && { tokenRejected: true }),
      };
    }
  } catch {
    // not JSON: not a record
  }
  return undefined;
}

const DETAIL = {
  UPSTREAM_AUTH_FAILED:
    "The upstream refused the gateway credentials of this account (check its username and password: UPSTREAM_USERNAME / UPSTREAM_PASSWORD, or the account's usernameFile / passwordFile in UPSTREAM_ACCOUNTS_FILE); retrying later.",
  UPSTREAM_IP_NOT_WHITELISTED:
    "The upstream refused the gateway's IP address: ask the provider to whitelist the gateway's egress IP.",
  UPSTREAM_TIMEOUT: 'The upstream token endpoint did not answer in time; retrying shortly.',
  UPSTREAM_UNAVAILABLE: 'The upstream token endpoint is unavailable; retrying shortly.',
} as const satisfies Partial<Record<ErrorReason, string>>;
type BackoffReason = keyof typeof DETAIL;

/** The error every caller gets, without an upstream call, while a back-off lasts. */
function backoffError(reason: string, remainingMs: number): GatewayError {
  const known: BackoffReason = reason in DETAIL ? (reason as BackoffReason) : 'UPSTREAM_UNAVAILABLE';
  return new GatewayError(known, DETAIL[known], {
    headers: { 'Retry-After': String(secondsToRetry(remainingMs)) },
  });
}

/** The Retry-After of a 429 from the token endpoint, in milliseconds (0 when absent or unreadable). */
function retryAfterMs(error: unknown): number {
  const value = isGatewayError(error) ? error.headers['Retry-After'] : undefined;
  const seconds = value === undefined ? Number.NaN : Number(value);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0;
}

/**
 * The back-offs this replica knows of (its own failures and the fleet's shared records). The refusal belongs to
 * the current credentials: a change of credentials starts it clean. Memory keeps them when the store is down.
 */
export class LoginBackoff {
  private readonly refusals: BackoffTrack;
  private readonly transients: BackoffTrack;
  private failure?: string;

  constructor(
    private fingerprint: string,
    now: () => number,
    random: () => number,
    settings: LoginBackoffSettings,
  ) {
    const login: BackoffPolicy = {
      minMs: settings.loginMinIntervalMs,
      maxMs: settings.loginMaxIntervalMs,
      ceilingMs: settings.loginMaxIntervalMs,
    };
    // A 429's Retry-After is honoured up to the login maximum, beyond the short transient cap.
    const transient: BackoffPolicy = {
      minMs: settings.transientMinMs,
      maxMs: settings.transientMaxMs,
      ceilingMs: Math.max(settings.transientMaxMs, settings.loginMaxIntervalMs),
    };
    this.refusals = new BackoffTrack(login, now, random);
    this.transients = new BackoffTrack(transient, now, random);
  }

  /** The reason of the last failure until a success (or new credentials) clears it. */
  get lastFailure(): string | undefined {
    return this.failure;
  }

  /** The records this replica shares after a failure of its own. */
  get records(): SharedFailures {
    return { refusal: this.refusals.current, transient: this.transients.current };
  }

  /**
   * Records a refusal of the credentials `fingerprint`; answers the record to share with the fleet, or undefined when
   * they are no longer the current ones (rotated while the call was on the wire): the new ones start clean.
   */
  refused(reason: RefusalReason, fingerprint: string = this.fingerprint): BackoffRecord | undefined {
    if (fingerprint !== this.fingerprint) return undefined;
    this.failure = reason;
    return this.refusals.failed(reason, this.fingerprint);
  }

  /**
   * Records that the provider refused a token obtained since its last accepted call (logins succeed, calls get
   * 401): a refusal of the gateway like a refused login, whose streak only an accepted call ends.
   */
  tokensRejected(fingerprint: string): BackoffRecord | undefined {
    if (fingerprint !== this.fingerprint) return undefined;
    this.failure = 'UPSTREAM_AUTH_FAILED';
    return this.refusals.failed('UPSTREAM_AUTH_FAILED', this.fingerprint, 0, true);
  }

  /** The provider has been refusing the tokens it issues, and has accepted none since. */
  get rejectingTokens(): boolean {
    return this.refusals.current?.tokenRejected === true;
  }

  /** The provider accepted a call: a streak of rejected tokens is over. */
  tokenAccepted(): void {
    if (!this.rejectingTokens) return;
    this.refusals.clear();
    this.failure = undefined;
  }

  /** Records a transient failure (a 429's Retry-After lengthens the wait); answers the record to share. */
  unavailable(error: unknown): BackoffRecord {
    const reason =
      isGatewayError(error) && TRANSIENT_REASONS.includes(error.reason)
        ? error.reason
        : 'UPSTREAM_UNAVAILABLE';
    this.failure = reason;
    return this.transients.failed(reason, undefined, retryAfterMs(error));
  }

  /** A token was obtained: nothing to back off from, unless the provider has been refusing the tokens it issues. */
  succeeded(): void {
    if (!this.rejectingTokens) this.refusals.clear();
    this.transients.clear();
    this.failure = undefined;
  }

  /** New credentials are tried at once; a transient outage of the token endpoint is not theirs to end. */
  credentialsChanged(fingerprint: string): void {
    this.fingerprint = fingerprint;
    this.refusals.clear();
    if (this.failure && REFUSAL_REASONS.includes(this.failure)) this.failure = undefined;
  }

  /** Takes in the fleet's records (a refusal only when it is of the current credentials). */
  observe(shared: SharedFailures): void {
    if (shared.refusal?.credentials === this.fingerprint) this.refusals.observe(shared.refusal);
    this.transients.observe(shared.transient);
    const blocking = this.blockingRecord();
    if (blocking) this.failure = blocking.reason;
  }

  /** As observe, and throws the back-off to the callers of this flight. */
  throwIfBlocked(shared: SharedFailures): void {
    this.observe(shared);
    const blocked = this.blocked();
    if (blocked) throw blocked;
  }

  /** Milliseconds left of each back-off (the gauge). */
  remainingByKind(): Record<FailureKind, number> {
    return { refusal: this.refusals.remaining(), transient: this.transients.remaining() };
  }

  /** Milliseconds before the token endpoints may be called again. */
  remaining(): number {
    return Math.max(this.refusals.remaining(), this.transients.remaining());
  }

  /** The error to answer without an upstream call while a back-off lasts. */
  blocked(): GatewayError | undefined {
    const left = this.refusals.remaining();
    if (left > 0) return backoffError((this.refusals.current as BackoffRecord).reason, left);
    const transientLeft = this.transients.remaining();
    if (transientLeft > 0)
      return backoffError((this.transients.current as BackoffRecord).reason, transientLeft);
    return undefined;
  }

  private blockingRecord(): BackoffRecord | undefined {
    if (this.refusals.remaining() > 0) return this.refusals.current;
    if (this.transients.remaining() > 0) return this.transients.current;
    return undefined;
  }
}
