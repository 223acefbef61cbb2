// The gateway as a confidential OIDC client (openid-client): authorization code + PKCE, refresh, logout tokens.
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';
import * as oidc from 'openid-client';
import { OIDC_ALGORITHMS } from '../callers/oidc-verifier';
import { GatewayError } from '../http/gateway-error';

export interface RelyingPartySettings {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The gateway's public origin: the callback is `<origin>/bff/callback`. */
  readonly publicOrigin: string;
  readonly scopes: string;
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

/** The provider refused the refresh token (revoked, expired, spent): the session must end. */
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
  /** Throws RefreshRefused when the provider refuses the token (invalid_grant); anything else keeps the session. */
  refresh(refreshToken: string): Promise<ProviderGrant>;
  /** The provider's end-session URL (RP-initiated logout), when it has one; never carries a token. */
  endSessionUrl(): Promise<URL | undefined>;
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
  options: { allowHttp: boolean; lockTtlMs: number },
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
        // Only invalid_grant is about this session's token; invalid_client & co. are the gateway's own registration.
        if (error instanceof oidc.ResponseBodyError && error.error === 'invalid_grant')
          throw new RefreshRefused(error.error);
        throw error;
      }
    },
    async endSessionUrl() {
      const config = await configuration();
      if (!config.serverMetadata().end_session_endpoint) return undefined;
      return oidc.buildEndSessionUrl(config, {
        client_id: settings.clientId,
        post_logout_redirect_uri: `${settings.publicOrigin}/`,
      });
    },
    verifyLogoutToken: logoutTokenVerifier(settings.clientId, configuration),
  };
}

/** The provider's configuration, discovered on first use; a failed discovery is forgotten, so the next use retries. */
function discoveryOnDemand(
  settings: RelyingPartySettings,
  options: { allowHttp: boolean; lockTtlMs: number },
): () => Promise<oidc.Configuration> {
  const timeout = providerTimeoutSeconds(options.lockTtlMs);
  let discovered: Promise<oidc.Configuration> | undefined;
  return () => {
    discovered ??= oidc
      .discovery(
        new URL(settings.issuer),
        settings.clientId,
        undefined,
        oidc.ClientSecretBasic(settings.clientSecret),
        options.allowHttp ? { execute: [oidc.allowInsecureRequests], timeout } : { timeout },
      )
      .catch((error: unknown) => {
        discovered = undefined;
        throw providerUnreachable(error);
      });
    return discovered;
  };
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
