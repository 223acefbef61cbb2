// The gateway as a confidential OIDC client (openid-client): authorization code + PKCE, refresh, logout tokens.
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';
import * as oidc from 'openid-client';
import { DEFAULT_ISSUER_FAILURE_MEMORY_MS, failureMemory } from '../callers/issuer-fetch';
import { OIDC_ALGORITHMS } from '../callers/oidc-verifier';
import { GatewayError } from '../http/gateway-error';

export interface RelyingPartySettings {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The gateway's public origin: the callback is `<origin>/bff/callback`. */
  readonly publicOrigin: string;
  readonly scopes: string;
  /** SESSION_CLIENT_AUTH_METHOD; unset: chosen from the provider's token_endpoint_auth_methods_supported. */
  readonly clientAuthMethod?: ClientAuthMethod;
  /**
   * SESSION_END_SESSION_METHOD (default `get`): `get` puts id_token_hint in the end-session link, which every provider
   * takes (RP-Initiated Logout 1.0 requires GET); `post` keeps it out of URLs, in a form to POST (a provider that
   * takes GET only answers that POST 404 and its session lives on).
   */
  readonly endSessionMethod?: 'get' | 'post';
}

/** How the gateway authenticates at the token endpoint. */
export const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'] as const;
export type ClientAuthMethod = (typeof CLIENT_AUTH_METHODS)[number];

/**
 * Where the browser ends the provider's session. `get` (the default): `url`, the link to follow, with `id_token_hint`
 * when the session held an ID token (a provider may refuse, or ask the user, without it), and no form. `post`: `url`
 * as a link without the token, and the form to POST there with `id_token_hint`, so the token never sits in a URL
 * (not in history, a Referer or the provider's access log); only for a provider that takes POST there.
 */
export interface EndSession {
  readonly url: URL;
  readonly form?: { readonly action: string; readonly fields: Readonly<Record<string, string>> };
}

/** What a login or a refresh tells about the user; the tokens stay on the server. */
export interface ProviderGrant {
  readonly claims: JWTPayload;
  readonly refreshToken?: string;
  readonly idToken?: string;
}

export interface LoginChecks {
  readonly state: string;
  readonly nonce: string;
  readonly codeVerifier: string;
}

/**
 * The provider refused the refresh (any 4xx of the token endpoint: invalid_grant, a revoked client, or a bare 400
 * with no `error` at all): the session must end. Only 5xx, timeouts and network errors are outages.
 */
export class RefreshRefused extends Error {
  constructor(readonly error: string) {
    super(`the provider refused the refresh token (${error})`);
    this.name = 'RefreshRefused';
  }
}

export interface RelyingParty {
  readonly settings: RelyingPartySettings;
  authorizationUrl(checks: LoginChecks): Promise<URL>;
  /** Exchanges the code of the callback at `callbackUrl`; throws GatewayError 400 when the provider refuses. */
  exchange(callbackUrl: URL, checks: LoginChecks): Promise<ProviderGrant>;
  /** Throws RefreshRefused when the provider answers 4xx; an outage (5xx, timeout, network) keeps the session. */
  refresh(refreshToken: string): Promise<ProviderGrant>;
  /** The provider's end-session endpoint (RP-initiated logout), when it has one (SESSION_END_SESSION_METHOD). */
  endSession(idToken?: string): Promise<EndSession | undefined>;
  /** Verifies a back-channel logout token with the provider's keys; the claims, or undefined when it is not valid. */
  verifyLogoutToken(token: string): Promise<JWTPayload | undefined>;
}

export const CALLBACK_PATH = '/bff/callback';
/** A logout token older than this (by its iat) is refused; its jti is remembered at least this long. */
export const LOGOUT_TOKEN_MAX_AGE_SECONDS = 600;
/** Clock difference tolerated with the provider, as openid-client tolerates for ID tokens. */
export const LOGOUT_TOKEN_CLOCK_TOLERANCE_SECONDS = 30;
const BACKCHANNEL_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

/** Longest wait for one provider request when the lock lease is unbounded by it (openid-client's default is 30 s). */
const MAX_PROVIDER_TIMEOUT_SECONDS = 10;

/**
 * Each provider request's timeout: a revalidation makes at most two (discovery, refresh) under the session's lock,
 * so together they end before the lease does and no other replica presents the same refresh token meanwhile.
 */
export function providerTimeoutSeconds(lockTtlMs: number): number {
  return Math.min(MAX_PROVIDER_TIMEOUT_SECONDS, lockTtlMs / 3000);
}

/**
 * Discovery happens on first use and is retried after a failure, so the gateway starts while the provider is down.
 * Plain-http providers are accepted only when `allowHttp` (never in production: the config refuses it there).
 */
export function createRelyingParty(
  settings: RelyingPartySettings,
  options: RelyingPartyOptions,
): RelyingParty {
  const configuration = discoveryOnDemand(settings, options);
  const redirectUri = `${settings.publicOrigin}${CALLBACK_PATH}`;
  return {
    settings,
    async authorizationUrl({ state, nonce, codeVerifier }) {
      return oidc.buildAuthorizationUrl(await configuration(), {
        redirect_uri: redirectUri,
        scope: settings.scopes,
        state,
        nonce,
        code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      });
    },
    exchange: async (callbackUrl, checks) => exchangeCode(await configuration(), callbackUrl, checks),
    async refresh(refreshToken) {
      const config = await configuration();
      try {
        return grantOf(await oidc.refreshTokenGrant(config, refreshToken));
      } catch (error) {
        const refusal = refusalOf(error);
        if (refusal) throw new RefreshRefused(refusal);
        throw error;
      }
    },
    async endSession(idToken) {
      const config = await configuration();
      const action = config.serverMetadata().end_session_endpoint;
      if (!action) return undefined;
      const fields = { client_id: settings.clientId, post_logout_redirect_uri: `${settings.publicOrigin}/` };
      const hinted = idToken ? { ...fields, id_token_hint: idToken } : fields;
      if ((settings.endSessionMethod ?? 'get') === 'get')
        return { url: oidc.buildEndSessionUrl(config, hinted) };
      return {
        url: oidc.buildEndSessionUrl(config, fields),
        ...(idToken ? { form: { action, fields: hinted } } : {}),
      };
    },
    verifyLogoutToken: logoutTokenVerifier(settings.clientId, configuration),
  };
}

export interface RelyingPartyOptions {
  readonly allowHttp: boolean;
  readonly lockTtlMs: number;
  /**
   * A failed discovery is remembered this long, as the SSO verifier remembers its issuer's (issuer-fetch.ts): logins
   * meanwhile fail from memory instead of each asking an unreachable provider. Default 5 s.
   */
  readonly discoveryFailureMemoryMs?: number;
}

/**
 * A 4xx is a refusal, whatever its body says (or lacks), the client's own (invalid_client) included: failing closed
 * ends a session the provider no longer vouches for. 408 and 429 say "later", not "no": outages, like 5xx.
 */
const NOT_A_REFUSAL = new Set([408, 429]);
const isRefusal = (status: number) => status >= 400 && status < 500 && !NOT_A_REFUSAL.has(status);

/** What a token endpoint answer that refused said, or undefined for an outage (5xx, 408, 429, timeout, network). */
function refusalOf(error: unknown): string | undefined {
  if (error instanceof oidc.ResponseBodyError) return isRefusal(error.status) ? error.error : undefined;
  if (error instanceof oidc.WWWAuthenticateChallengeError)
    return isRefusal(error.status) ? `HTTP ${error.status}` : undefined;
  // A 4xx without an OAuth error body (a bare 400): openid-client hands over the Response as the cause.
  const status =
    error instanceof oidc.ClientError && error.cause instanceof Response ? error.cause.status : 0;
  return isRefusal(status) ? `HTTP ${status}` : undefined;
}

/**
 * The provider's configuration, discovered on first use. A failed discovery is remembered for a few seconds (then
 * the next use retries), so a burst of logins during an outage costs the provider one discovery, not one each.
 */
function discoveryOnDemand(
  settings: RelyingPartySettings,
  options: RelyingPartyOptions,
): () => Promise<oidc.Configuration> {
  const timeout = providerTimeoutSeconds(options.lockTtlMs);
  const failures = failureMemory(options.discoveryFailureMemoryMs ?? DEFAULT_ISSUER_FAILURE_MEMORY_MS);
  let discovered: Promise<oidc.Configuration> | undefined;
  return () => {
    if (discovered) return discovered;
    try {
      failures.check();
    } catch (remembered) {
      return Promise.reject(providerUnreachable(remembered));
    }
    discovered = oidc
      .discovery(
        new URL(settings.issuer),
        settings.clientId,
        undefined,
        undefined,
        options.allowHttp ? { execute: [oidc.allowInsecureRequests], timeout } : { timeout },
      )
      .then((found) => withClientAuthentication(found, settings, options, timeout))
      .catch((error: unknown) => {
        discovered = undefined;
        failures.remember(error);
        throw providerUnreachable(error);
      });
    return discovered;
  };
}

/**
 * The configuration again, with the client's authentication at the token endpoint: SESSION_CLIENT_AUTH_METHOD, or
 * the provider's choice when unset. client_secret_basic is the OAuth default (and what a provider that lists
 * nothing takes); client_secret_post when the provider lists only it: some providers do not decode the form-encoded
 * id and secret of basic (a `-` arriving as `%2D`).
 */
function withClientAuthentication(
  found: oidc.Configuration,
  settings: RelyingPartySettings,
  options: RelyingPartyOptions,
  timeout: number,
): oidc.Configuration {
  const method = settings.clientAuthMethod ?? chosenAuthMethod(found.serverMetadata());
  const authentication =
    method === 'client_secret_post'
      ? oidc.ClientSecretPost(settings.clientSecret)
      : oidc.ClientSecretBasic(settings.clientSecret);
  const config = new oidc.Configuration(found.serverMetadata(), settings.clientId, undefined, authentication);
  if (options.allowHttp) oidc.allowInsecureRequests(config);
  config.timeout = timeout;
  return config;
}

export function chosenAuthMethod(metadata: oidc.ServerMetadata): ClientAuthMethod {
  const supported = metadata.token_endpoint_auth_methods_supported;
  if (!supported || supported.includes('client_secret_basic')) return 'client_secret_basic';
  return supported.includes('client_secret_post') ? 'client_secret_post' : 'client_secret_basic';
}

/** The code of the callback exchanged for tokens; a refusal or an invalid answer is the login's (400), else 503. */
async function exchangeCode(
  config: oidc.Configuration,
  callbackUrl: URL,
  { state, nonce, codeVerifier }: LoginChecks,
): Promise<ProviderGrant> {
  try {
    const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: codeVerifier,
      expectedState: state,
      expectedNonce: nonce,
      idTokenExpected: true,
    });
    return grantOf(tokens);
  } catch (error) {
    if (error instanceof oidc.ResponseBodyError || error instanceof oidc.AuthorizationResponseError)
      throw new GatewayError('INVALID_REQUEST', 'The identity provider refused the login: start again.', {
        cause: error,
      });
    if (error instanceof oidc.ClientError)
      throw new GatewayError('INVALID_REQUEST', 'The login answer is not valid: start again.', {
        cause: error,
      });
    throw providerUnreachable(error);
  }
}

function providerUnreachable(cause: unknown): GatewayError {
  return new GatewayError(
    'UPSTREAM_UNAVAILABLE',
    'The identity provider cannot be reached; try again later.',
    {
      cause,
    },
  );
}

function grantOf(tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers): ProviderGrant {
  return { claims: tokens.claims() ?? {}, refreshToken: tokens.refresh_token, idToken: tokens.id_token };
}

/** Back-channel logout tokens verified with the provider's keys (fetched once known): the claims, or undefined. */
function logoutTokenVerifier(
  clientId: string,
  configuration: () => Promise<oidc.Configuration>,
): (token: string) => Promise<JWTPayload | undefined> {
  let keys: ReturnType<typeof createRemoteJWKSet> | undefined;
  return async (token) => {
    const config = await configuration();
    const jwksUri = config.serverMetadata().jwks_uri;
    if (!jwksUri) return undefined;
    keys ??= createRemoteJWKSet(new URL(jwksUri));
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: config.serverMetadata().issuer,
        audience: clientId,
        // Asymmetric algorithms only, as for SSO tokens: one signed with a shared secret, or not at all, is refused.
        algorithms: OIDC_ALGORITHMS,
        maxTokenAge: LOGOUT_TOKEN_MAX_AGE_SECONDS,
        clockTolerance: LOGOUT_TOKEN_CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['iat', 'jti'],
      });
      // The event's value is a JSON object (typeof null and of a list are 'object' too); sid or sub names someone.
      const events = payload.events;
      const valid =
        isObject(events) &&
        isObject(events[BACKCHANNEL_EVENT]) &&
        payload.nonce === undefined &&
        (nonEmpty(payload.sid) || nonEmpty(payload.sub));
      return valid ? payload : undefined;
    } catch {
      return undefined;
    }
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nonEmpty(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}
