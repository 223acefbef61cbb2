// Verifies company-SSO bearer JWTs against the OIDC issuer's JWKS and turns them into a Caller.
import { createRemoteJWKSet, customFetch, errors, type JWTPayload, jwtVerify } from 'jose';
import { GatewayError } from '../http/gateway-error';
import type { Caller } from './caller';
import type { ClientRegistry } from './client-registry';
import {
  DEFAULT_ISSUER_FAILURE_MEMORY_MS,
  failureMemory,
  jwksFetchRememberingFailures,
} from './issuer-fetch';
import { CLIENT_ID_PATTERN } from './registry-schema';

export interface OidcVerifierOptions {
  /** Expected `iss`, exactly as the issuer writes it. */
  readonly issuer: string;
  /** Expected `aud` (one of the token's audiences). */
  readonly audience: string;
  /** The JWKS endpoint; discovered from `${issuer}/.well-known/openid-configuration` when absent. */
  readonly jwksUrl?: string;
  /** Allowed clock skew for exp / nbf / iat, in seconds (bounded by the config schema to 0..300). */
  readonly clockToleranceSeconds: number;
  /**
   * The `typ` header values of an access token, lower case without `application/` (OIDC_ACCESS_TOKEN_TYPES). Default
   * `at+jwt` (RFC 9068). A token whose `typ` is another (an ID token's `JWT`) is refused; a token without one passes.
   */
  readonly accessTokenTypes?: readonly string[];
  /**
   * The registry entry whose id is the token's client id limits the token's scopes to its own and lends it its rate
   * limit, origins, accounts, priority and quota. A client with no entry is refused (403) when the registry lists SSO
   * clients or `registeredClientsOnly` is set.
   */
  readonly registry?: Pick<ClientRegistry, 'findById' | 'listsSsoClients'>;
  /** Production: an SSO client must have a registry entry, whatever else the registry lists. */
  readonly registeredClientsOnly?: boolean;
  /**
   * Minimum spacing of JWKS refetches on an unknown `kid` (jose's cooldown). Default 10 s: an issuer that starts
   * signing with a key it had not published yet is picked up within seconds, while tokens with made-up kids still
   * cost the issuer at most one fetch per replica every 10 s.
   */
  readonly jwksCooldownMs?: number;
  /** Time limit of a JWKS or discovery fetch. Default 5 s. */
  readonly fetchTimeoutMs?: number;
  /**
   * A failed discovery or JWKS fetch is remembered this long: meanwhile bearer tokens that need the issuer are
   * refused without asking it again. Default 5 s.
   */
  readonly issuerFailureMemoryMs?: number;
  /** Told when the issuer's keys cannot be fetched (an operator problem, not the caller's). */
  readonly logger?: { warn(fields: Record<string, unknown>, message: string): void };
}

export interface OidcVerifier {
  /** The Caller of a valid token; otherwise throws GatewayError CLIENT_UNAUTHENTICATED (the detail never quotes it). */
  verify(token: string): Promise<Caller>;
}

/** Asymmetric algorithms only: HS* would let anyone holding the (public) JWKS forge tokens, `none` signs nothing. */
export const OIDC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];

/** Compact JWS of a sane size: anything else is refused before any parsing. */
const MAX_TOKEN_LENGTH = 8_192;

/**
 * The client id is `azp` (OIDC: the party the token was issued to), else `client_id` (RFC 9068 access tokens).
 * There is deliberately no fallback to `sub`: that is the user, and limits and metrics are per client app, not
 * per person. A token naming no client is refused.
 *
 * Scopes are the union of `scope` (RFC 8693/9068, space separated) and `scp` (Azure AD / Okta: array or string).
 */
export function createOidcVerifier(options: OidcVerifierOptions): OidcVerifier {
  const timeoutDuration = options.fetchTimeoutMs ?? 5_000;
  const accessTokenTypes = new Set(options.accessTokenTypes ?? DEFAULT_ACCESS_TOKEN_TYPES);
  const memoryMs = options.issuerFailureMemoryMs ?? DEFAULT_ISSUER_FAILURE_MEMORY_MS;
  // The operator is told once per failed fetch; the failures answered from memory meanwhile are not news.
  const tell = (error: unknown) =>
    options.logger?.warn(
      { err: { message: error instanceof Error ? error.message : String(error) } },
      'OIDC issuer keys unavailable',
    );
  const discoveryFailure = failureMemory(memoryMs, tell);
  const jwksFetch = jwksFetchRememberingFailures(failureMemory(memoryMs, tell));
  let jwks: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;

  const keySet = () => {
    discoveryFailure.check();
    if (!jwks) {
      jwks = resolveJwksUrl(options, timeoutDuration).then((url) =>
        createRemoteJWKSet(url, {
          cooldownDuration: options.jwksCooldownMs ?? 10_000,
          timeoutDuration,
          [customFetch]: jwksFetch,
        }),
      );
      // A failed discovery is retried, but not before its memory expires: until then requests fail from memory.
      jwks.catch((error: unknown) => {
        discoveryFailure.remember(error);
        jwks = undefined;
      });
    }
    return jwks;
  };

  return {
    async verify(token) {
      if (token.length > MAX_TOKEN_LENGTH || token.split('.').length !== 3) {
        throw unauthenticated('The bearer token is not a signed JWT.');
      }
      let payload: JWTPayload;
      let type: unknown;
      try {
        const { payload: verified, protectedHeader } = await jwtVerify(token, await keySet(), {
          issuer: options.issuer,
          audience: options.audience,
          algorithms: OIDC_ALGORITHMS,
          clockTolerance: options.clockToleranceSeconds,
          requiredClaims: ['exp'],
        });
        payload = verified;
        type = protectedHeader.typ;
      } catch (error) {
        throw unauthenticated(explain(error), error);
      }
      if (!isAccessTokenType(type, accessTokenTypes))
        throw unauthenticated(
          'The bearer token is not an access token (its "typ" header names another type).',
        );
      return callerOf(payload, options);
    },
  };
}

/**
 * The caller a verified access token names: its client (a registry entry, when it has one, limits its scopes and
 * lends it the rest), or a refusal of a token naming no client, or a client the registry does not admit.
 */
function callerOf(
  payload: JWTPayload,
  options: Pick<OidcVerifierOptions, 'registry' | 'registeredClientsOnly'>,
): Caller {
  const clientId = firstString(payload.azp, payload.client_id);
  if (clientId === undefined) throw unauthenticated('The bearer token names no client (azp or client_id).');
  // Both set and different: no way to tell which registry entry limits the token (RFC 9068 says client_id, OIDC azp).
  const other = firstString(payload.client_id);
  if (other !== undefined && other !== clientId)
    throw unauthenticated('The bearer token names two clients (azp and client_id differ).');
  if (!CLIENT_ID_PATTERN.test(clientId))
    throw unauthenticated('The bearer token names a malformed client id.');
  const known = options.registry?.findById(clientId);
  if (!known && (options.registeredClientsOnly || options.registry?.listsSsoClients()))
    throw new GatewayError(
      'CLIENT_FORBIDDEN',
      `The SSO client "${clientId}" is not in the client registry of this gateway.`,
    );
  return Object.freeze({
    id: clientId,
    scopes: known ? grantedScopes(scopesOf(payload), known.scopes) : scopesOf(payload),
    via: 'oidc' as const,
    rateLimit: known?.rateLimit,
    priority: known?.priority,
    quota: known?.quota,
    accounts: known?.accounts,
    origins: known?.origins ?? [],
  });
}

/** RFC 9068 §2.1: access tokens are typed `at+jwt` (`application/at+jwt`). */
export const DEFAULT_ACCESS_TOKEN_TYPES = ['at+jwt'];

/**
 * Whether a token's `typ` header is an access token's (issue 42): an ID token is signed by the same issuer and may
 * carry the gateway's audience (when that is also a client id at the IdP), but it says who signed in, not what an app
 * may do. Media types are compared case-insensitively without `application/` (RFC 7515 §4.1.9). A token with no
 * `typ` passes: many issuers never set it on access tokens, and refusing those would refuse them all.
 */
function isAccessTokenType(type: unknown, accepted: ReadonlySet<string>): boolean {
  if (type === undefined) return true;
  if (typeof type !== 'string') return false;
  return accepted.has(type.toLowerCase().replace(/^application\//, ''));
}

async function resolveJwksUrl(options: OidcVerifierOptions, timeoutMs: number): Promise<URL> {
  if (options.jwksUrl) return new URL(options.jwksUrl);
  const discovery = `${options.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  const response = await fetch(discovery, { signal: AbortSignal.timeout(timeoutMs), redirect: 'error' });
  if (!response.ok) throw new Error(`OIDC discovery answered ${response.status}`);
  const document = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
  // OIDC Discovery §4.3: the document must name the very issuer it was fetched for.
  if (document.issuer !== options.issuer) throw new Error('OIDC discovery names another issuer');
  if (typeof document.jwks_uri !== 'string') throw new Error('OIDC discovery has no jwks_uri');
  // OIDC Discovery §3: an absolute URL. A relative one is named as such, not as a bare "Invalid URL".
  if (!URL.canParse(document.jwks_uri)) throw new Error('OIDC discovery jwks_uri is not an absolute URL');
  const jwksUrl = new URL(document.jwks_uri);
  // An https issuer's keys never come over plain http (production requires https issuers): an issuer behind a TLS
  // proxy that lost X-Forwarded-Proto advertises http:// endpoints, and keys fetched in clear can be swapped. The
  // issuer's scheme is read as a URL reads it (HTTPS:// is https, as for the production rule).
  if (new URL(options.issuer).protocol === 'https:' && jwksUrl.protocol !== 'https:')
    throw new Error(
      'OIDC discovery jwks_uri is not https, although the issuer is (fix the issuer or set OIDC_JWKS_URL)',
    );
  return jwksUrl;
}

function scopesOf(payload: JWTPayload): ReadonlySet<string> {
  const scopes = new Set<string>();
  const add = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const item of value) add(item);
    } else if (typeof value === 'string') {
      for (const scope of value.split(' ')) if (scope !== '') scopes.add(scope);
    }
  };
  add(payload.scope);
  add(payload.scp);
  return scopes;
}

/**
 * What an SSO client may do: the scopes its token carries that its registry entry lists too (issue 42). The IdP says
 * what the user consented to, the registry what the gateway lets that app do; neither widens the other.
 */
function grantedScopes(token: ReadonlySet<string>, entry: ReadonlySet<string>): ReadonlySet<string> {
  return new Set([...token].filter((scope) => entry.has(scope)));
}

function firstString(...values: unknown[]): string | undefined {
  return values.find((value): value is string => typeof value === 'string' && value.length > 0);
}

const KEYS_UNAVAILABLE = 'The bearer token could not be verified: the issuer keys are unavailable.';

/** Whether a refusal says the issuer could not be asked (an outage), rather than that the token is bad. */
export function isIssuerUnavailable(error: GatewayError): boolean {
  return error.detail === KEYS_UNAVAILABLE;
}

/** A sentence for the caller; jose's own messages are safe too, but these say what to fix. */
function explain(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'The bearer token has expired.';
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'iss':
        return 'The bearer token was issued by an issuer this gateway does not trust.';
      case 'aud':
        return 'The bearer token is not meant for this gateway (audience).';
      case 'nbf':
      case 'iat':
        return 'The bearer token is not valid yet.';
      default:
        return `The bearer token has an invalid "${error.claim}" claim.`;
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) {
    return 'The bearer token is signed with an algorithm this gateway does not accept.';
  }
  if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JWKSNoMatchingKey) {
    return 'The bearer token signature does not verify against the issuer keys.';
  }
  if (
    error instanceof errors.JWKSTimeout ||
    error instanceof errors.JWKSInvalid ||
    !(error instanceof errors.JOSEError)
  ) {
    return KEYS_UNAVAILABLE;
  }
  return 'The bearer token is not a valid JWT.';
}

function unauthenticated(detail: string, cause?: unknown): GatewayError {
  return new GatewayError('CLIENT_UNAUTHENTICATED', detail, { cause });
}
