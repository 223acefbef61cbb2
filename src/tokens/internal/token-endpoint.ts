// One new token pair from the upstream: the refresh token first, the credentials when it is refused.
import type { Logger } from 'pino';
import { GatewayError, isGatewayError } from '../../http/gateway-error';
import type { TokenKeys } from '../../keys/redis-keys';
import type { Metrics } from '../../observability/metrics';
import { NO_TRACING, type Tracing } from '../../observability/tracing';
import { bindFailureOf } from '../../tls/local-address';
import { tlsFailureOf } from '../../tls/tls-failure';
import type { BackoffRecord } from './backoff-track';
import type { Clock } from './clock';
import type { Credentials } from './credentials';
import { ACCESS_FALLBACK_SECONDS, REFRESH_FALLBACK_SECONDS, tokenExpiresAt } from './jwt-expiry';
import { type FailureKind, isRefusal, type LoginBackoff } from './login-backoff';
import type { SharedTokenCache } from './shared-token-cache';
import type { TokenClient } from './token-client';
import type { TokenPair } from './token-pair';

export interface TokenEndpointDeps {
  readonly client: TokenClient;
  readonly cache: SharedTokenCache;
  readonly backoff: LoginBackoff;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'tokenRequests'>;
  /** A refresh token this close to its end is not used: a login is surer. */
  readonly skewMs: number;
  /** Spans of the refresh and login calls. */
  readonly tracing?: Tracing;
}

/** How long a shared failure record outlives its wait: the streak, and so the growing wait, survives between tries. */
export const STREAK_MEMORY_MS: Record<FailureKind, number> = {
  refusal: 24 * 3_600_000,
  transient: 10 * 60_000,
};

export class TokenEndpoint {
  private readonly tracing: Tracing;

  constructor(private readonly deps: TokenEndpointDeps) {
    this.tracing = deps.tracing ?? NO_TRACING;
  }

  /** Every failure is shared as a back-off: no replica asks the provider again before it ends. */
  async fetch(keys: TokenKeys, credentials: Credentials, base?: TokenPair): Promise<TokenPair> {
    const { client, backoff, clock } = this.deps;
    const blocked = backoff.blocked();
    if (blocked) throw blocked;
    if (base && base.refreshExpiresAt - clock.now() > this.deps.skewMs) {
      const started = clock.now();
      try {
        const answer = await this.tracing.inSpan('token.refresh', () => client.refresh(base.refresh));
        this.recordCall('refresh', 'success', started);
        return this.pairOf(answer.access, answer.refresh, credentials, base);
      } catch (error) {
        this.recordCall('refresh', resultOf(error), started, error);
        // A refused refresh token (expired, revoked, rotated away) is no refusal of the gateway: log in.
        if (!isGatewayError(error) || error.reason !== 'UPSTREAM_AUTH_FAILED')
          throw await this.failed(error, keys, credentials);
      }
    }
    const started = clock.now();
    try {
      const answer = await this.tracing.inSpan('token.login', () => client.login(credentials));
      this.recordCall('login', 'success', started);
      return this.pairOf(answer.access, answer.refresh, credentials);
    } catch (error) {
      this.recordCall('login', resultOf(error), started, error);
      throw await this.failed(error, keys, credentials);
    }
  }

  /**
   * The provider refused a token obtained since its last accepted call: recorded and shared as a refusal, so that
   * caller traffic cannot turn into one login per request; answers what the callers get.
   */
  async tokensRejected(keys: TokenKeys, credentials: Credentials): Promise<GatewayError> {
    const { backoff, cache, logger } = this.deps;
    const record = backoff.tokensRejected(credentials.fingerprint);
    if (record && record.waitMs > 0)
      await cache.writeFailure(keys, 'refusal', record, record.waitMs + STREAK_MEMORY_MS.refusal);
    logger.warn(
      { event: 'token.rejected', streak: record?.streak, waitMs: record?.waitMs },
      'the upstream refuses the tokens it issues: backing off as after a refused login',
    );
    return (
      backoff.blocked() ??
      new GatewayError('UPSTREAM_AUTH_FAILED', 'The upstream refused the tokens it issued to the gateway.')
    );
  }

  /** A rotated refresh token replaces the old one; without rotation the old one (and its expiry) stays. */
  private pairOf(
    access: string,
    refresh: string | undefined,
    credentials: Credentials,
    base?: TokenPair,
  ): TokenPair {
    const now = this.deps.clock.now();
    const kept = refresh === undefined ? base : undefined;
    if (!refresh && !kept)
      throw new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream token endpoint gave no refresh token.');
    return {
      access,
      refresh: refresh ?? (kept as TokenPair).refresh,
      accessExpiresAt: tokenExpiresAt(access, ACCESS_FALLBACK_SECONDS, now),
      refreshExpiresAt: kept
        ? kept.refreshExpiresAt
        : tokenExpiresAt(refresh as string, REFRESH_FALLBACK_SECONDS, now),
      credentials: credentials.fingerprint,
    };
  }

  private recordCall(kind: 'login' | 'refresh', result: string, started: number, error?: unknown): void {
    this.deps.metrics.tokenRequests.inc({ kind, result });
    const durationMs = this.deps.clock.now() - started;
    const entry = { event: `token.${kind}`, result, durationMs };
    if (result === 'success') {
      this.deps.logger.info(entry, `token ${kind} succeeded`);
      return;
    }
    // A TLS refusal is an operator's problem with a known fix: name it (code, cause, fix; never a token).
    const tls = tlsFailureOf(error);
    const unbound = bindFailureOf(error);
    if (tls) this.deps.logger.warn({ ...entry, tls }, `token ${kind} failed: ${tls.cause}`);
    else if (unbound)
      this.deps.logger.error({ ...entry, ...unbound.fields }, `token ${kind} failed: ${unbound.message}`);
    else this.deps.logger.warn(entry, `token ${kind} failed`);
  }

  /** Remembers a failure here and for the fleet; answers what the callers of this flight get. */
  private async failed(error: unknown, keys: TokenKeys, credentials: Credentials): Promise<unknown> {
    const { backoff, cache } = this.deps;
    const refused = isRefusal(error);
    const kind: FailureKind = refused ? 'refusal' : 'transient';
    const record: BackoffRecord | undefined = refused
      ? backoff.refused(error.reason, credentials.fingerprint)
      : backoff.unavailable(error);
    // A refusal of credentials replaced while the call was on the wire says nothing about the new ones.
    if (!record) return error;
    if (record.waitMs > 0)
      await cache.writeFailure(keys, kind, record, record.waitMs + STREAK_MEMORY_MS[kind]);
    return backoff.blocked() ?? error;
  }
}

/** The metric and log label of a failed call. */
export function resultOf(error: unknown): string {
  return isGatewayError(error) ? error.reason.toLowerCase() : 'error';
}
