// What a session's claims make of it: the stored grant after a login or refresh, and the caller of each request.
import type { JWTPayload } from 'jose';
import type { Caller } from '../callers/caller';
import type { ClientRegistry } from '../callers/client-registry';
import { GatewayError } from '../http/gateway-error';
import { keyedReference } from '../keys/derived-keys';
import type { ProviderGrant, RelyingParty } from './relying-party';
import type { SessionGrant, SessionRecord } from './session-store';

export interface SessionCallerDeps {
  readonly registry: Pick<ClientRegistry, 'findWebApp'>;
  /** The relying party (throws while it is not known yet): its client id names the web app. */
  readonly relyingParty: () => RelyingParty;
  /** Key of the users' keyed references in logs and limits (never the raw subject). */
  readonly userKey: Buffer;
}

export interface SessionCaller {
  /** What a provider's grant makes of the stored one (`previous` after a refresh, undefined at login). */
  grantFrom(grant: ProviderGrant, previous: SessionRecord | undefined, now: number): SessionGrant;
  /** The caller a request authenticated by this session acts as: the web app, with the user's scopes. */
  callerOf(record: SessionRecord): Caller;
  /** The user's keyed reference, for logs and per-user limits. */
  userRef(sub: string): string;
}

export function createSessionCaller(deps: SessionCallerDeps): SessionCaller {
  // Looked up per use: the registry reloads (SIGHUP), and a reload may change the web app's claim or scopes.
  const webApp = () => {
    const app = deps.registry.findWebApp(deps.relyingParty().settings.clientId);
    if (!app)
      throw new GatewayError(
        'CLIENT_FORBIDDEN',
        'No registry entry with "session" names the web app of browser sessions (SESSION_CLIENT_ID).',
      );
    return app;
  };
  // 16 hex characters, as every other keyed reference in logs.
  const userRef = (sub: string) => keyedReference(deps.userKey, sub, 16);
  return {
    grantFrom(grant, previous, now) {
      const claims = grant.claims;
      return {
        name: stringClaim(claims.name) ?? previous?.name,
        email: stringClaim(claims.email) ?? previous?.email,
        claimValues:
          // A new ID token is authoritative: providers omit an empty groups claim, so absent means none left.
          grant.idToken === undefined
            ? [...(previous?.claimValues ?? [])]
            : claimValues(claims, webApp().claim),
        revalidatedAt: now,
        refreshToken: grant.refreshToken ?? previous?.refreshToken,
        idToken: grant.idToken ?? previous?.idToken,
      };
    },
    callerOf(record) {
      const app = webApp();
      return {
        id: app.caller.id,
        scopes: app.scopesFor(record.claimValues),
        via: 'session',
        rateLimit: app.caller.rateLimit,
        accounts: app.caller.accounts,
        origins: app.caller.origins,
        user: userRef(record.sub),
        userRateLimit: app.userRateLimit,
      };
    },
    userRef,
  };
}

/** A claim usable as a name: a non-empty string of sensible length; anything else is absent. */
export function stringClaim(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 && value.length <= 256 ? value : undefined;
}

/** The claim's values: a list of strings, or one string; anything else grants nothing. */
function claimValues(claims: JWTPayload, claim: string): string[] {
  const value = claims[claim];
  if (typeof value === 'string') return [value];
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string').slice(0, 256) : [];
}
