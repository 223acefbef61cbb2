// Browser sessions (backend-for-frontend): the /bff/* routes and the cookie authentication of the two operations.
import { createHmac } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { JWTPayload } from 'jose';
import type { Logger } from 'pino';
import type { Caller } from '../callers/caller';
import type { ClientRegistry } from '../callers/client-registry';
import { GatewayError } from '../http/gateway-error';
import { methodNotAllowed } from '../http/unmatched';
import { routeName } from '../observability/request-log';
import type { Clock, RecordSeal, TokenStore } from '../tokens';
import {
  clearCookie,
  cookieValues,
  cookieValuesToEnd,
  LOGIN_COOKIE,
  SESSION_COOKIE,
  setLoginCookie,
  setSessionCookie,
  singleCookie,
} from './cookies';
import { bindingOf, createLoginStates, LOGIN_TTL_SECONDS, randomValue } from './login-state';
import { createLogoutReplays } from './logout-replays';
import { CALLBACK_PATH, type ProviderGrant, type RelyingParty } from './relying-party';
import { safeReturnTo } from './return-to';
import { createRevalidation, type Revalidation } from './revalidation';
import type { SessionIndex } from './session-index';
import {
  createSessionStore,
  type SessionGrant,
  type SessionRecord,
  type SessionStore,
} from './session-store';

export interface BrowserSessionsDeps {
  readonly store: TokenStore;
  readonly index: SessionIndex;
  readonly seal: RecordSeal;
  readonly registry: Pick<ClientRegistry, 'findWebApp'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly keyPrefix: string;
  /** Who sessions are made for (issuer and web app): another's session sharing the store does not open here. */
  readonly sessionOwner: string;
  /** The relying party, once known (local mode knows it only after the development provider started). */
  readonly relyingParty: () => RelyingParty | undefined;
  readonly idleTimeoutSeconds: number;
  readonly maxLifetimeSeconds: number;
  readonly revalidateSeconds: number;
  readonly lockTtlMs: number;
  /** Key of the users' keyed references in logs and limits (never the raw subject). */
  readonly userKey: Buffer;
}

export interface BrowserSessions {
  readonly router: Router;
  /**
   * Authenticates a request carrying the session cookie ({@link carries}) and no other credential. CSRF: the request
   * must carry `X-CSRF: 1` and, when the browser sends them, the gateway's own Origin and Sec-Fetch-Site
   * same-origin; otherwise 403.
   */
  authenticate(req: Request, res: Response, next: NextFunction): void;
  /** Whether the request carries the session cookie at all (cheap: nothing is looked up). */
  carries(req: Request): boolean;
  readonly sessions: SessionStore;
  readonly revalidation: Revalidation;
}

const LOGIN_HINT = 'The session has ended or is not valid: log in again at /bff/login.';

export function createBrowserSessions(deps: BrowserSessionsDeps): BrowserSessions {
  const { clock, logger, registry } = deps;
  const sessions = answeringStoreOutages(
    createSessionStore({
      store: deps.store,
      index: deps.index,
      seal: deps.seal,
      clock,
      keyPrefix: deps.keyPrefix,
      owner: deps.sessionOwner,
      timeouts: { idleMs: deps.idleTimeoutSeconds * 1000, absoluteMs: deps.maxLifetimeSeconds * 1000 },
    }),
  );
  const logins = answeringStoreOutages(createLoginStates(deps.store, deps.seal, deps.keyPrefix));
  const logoutReplays = answeringStoreOutages(createLogoutReplays(deps.store, deps.keyPrefix));
  const rp = (): RelyingParty => {
    const current = deps.relyingParty();
    if (!current)
      throw new GatewayError('UPSTREAM_UNAVAILABLE', 'Browser sessions are starting; try again shortly.');
    return current;
  };
  const webApp = () => {
    const app = registry.findWebApp(rp().settings.clientId);
    if (!app)
      throw new GatewayError(
        'CLIENT_FORBIDDEN',
        'No registry entry with "session" names the web app of browser sessions (SESSION_CLIENT_ID).',
      );
    return app;
  };
  const grantFrom = (
    grant: ProviderGrant,
    previous: SessionRecord | undefined,
    now: number,
  ): SessionGrant => {
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
  };
  const revalidation = createRevalidation({
    sessions,
    store: deps.store,
    relyingParty: deps.relyingParty,
    clock,
    logger,
    intervalMs: deps.revalidateSeconds * 1000,
    lockTtlMs: deps.lockTtlMs,
    grantFrom,
  });
  const userRef = (sub: string) =>
    createHmac('sha256', deps.userKey).update(sub).digest('base64url').slice(0, 16);

  /** 403 unless the request proves it comes from the gateway's own pages (a cross-site form cannot set X-CSRF). */
  const refuseCrossSite = (req: Request): GatewayError | undefined => {
    if (req.headers['x-csrf'] !== '1')
      return new GatewayError(
        'CLIENT_FORBIDDEN',
        'A request authenticated by the session cookie must carry X-CSRF: 1.',
      );
    // Fetch metadata, where the browser sends it: only the gateway's own pages (a sibling subdomain is same-site).
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin')
      return new GatewayError('CLIENT_FORBIDDEN', 'Only pages of this origin may use the session cookie.');
    const origin = req.headers.origin;
    if (origin === undefined) return undefined;
    // Same origin only: CORS never allows credentials, so no other origin could read an answer anyway.
    if (origin === rp().settings.publicOrigin) return undefined;
    return new GatewayError('CLIENT_FORBIDDEN', 'This origin may not use the session cookie.');
  };
  const unauthenticated = (res: Response) => {
    clearCookie(res, SESSION_COOKIE);
    return new GatewayError('CLIENT_UNAUTHENTICATED', LOGIN_HINT, {
      headers: { Link: '</bff/login>; rel="login"' },
    });
  };
  /** The session of a request that passed the CSRF check, or a GatewayError to answer. */
  const sessionOf = async (req: Request, res: Response) => {
    const id = singleCookie(req, SESSION_COOKIE);
    const open = id === undefined ? undefined : await sessions.open(id);
    if (!open) throw unauthenticated(res);
    return open;
  };
  const callerOf = (record: SessionRecord): Caller => {
    const app = webApp();
    return {
      id: app.caller.id,
      scopes: app.scopesFor(record.claimValues),
      via: 'session',
      rateLimit: app.caller.rateLimit,
      origins: app.caller.origins,
      user: userRef(record.sub),
      userRateLimit: app.userRateLimit,
    };
  };

  const router = express.Router();
  router.get('/bff/login', routeName('session-login'), async (req, res) => {
    const relyingParty = rp();
    const returnTo = safeReturnTo(queryOf(req).get('returnTo'), relyingParty.settings.publicOrigin);
    if (returnTo === undefined)
      throw new GatewayError('INVALID_REQUEST', 'returnTo must be a path on this site.', {
        errors: [{ path: 'returnTo', message: 'must be a relative path starting with a single /' }],
      });
    const state = randomValue();
    const nonce = randomValue();
    const codeVerifier = randomValue();
    // One binding per browser, kept across logins: a second tab's login must not orphan the first tab's.
    const browser = reusableBinding(singleCookie(req, LOGIN_COOKIE)) ?? randomValue();
    const url = await relyingParty.authorizationUrl({ state, nonce, codeVerifier });
    await logins.save(state, { codeVerifier, nonce, returnTo, binding: bindingOf(browser) });
    setLoginCookie(res, browser, LOGIN_TTL_SECONDS);
    res.redirect(303, url.href);
  });
  router.get(CALLBACK_PATH, routeName('session-callback'), async (req, res) => {
    // A HEAD (a link checker, a prefetch) must not spend the one use of the login's state.
    if (req.method !== 'GET')
      throw new GatewayError('METHOD_NOT_ALLOWED', 'Only GET finishes a login.', {
        headers: { allow: 'GET' },
      });
    const relyingParty = rp();
    const state = queryOf(req).get('state');
    const pending = state ? await logins.take(state) : undefined;
    const browser = singleCookie(req, LOGIN_COOKIE);
    if (!state || !pending || browser === undefined || bindingOf(browser) !== pending.binding) {
      throw new GatewayError(
        'INVALID_REQUEST',
        'This login is unknown, was already used, expired or was started in another browser: start again at /bff/login.',
      );
    }
    // The login cookie stays until its Max-Age: another tab's login in this browser may still be on its way back.
    const callbackUrl = new URL(req.originalUrl, relyingParty.settings.publicOrigin);
    const grant = await relyingParty.exchange(callbackUrl, {
      state,
      nonce: pending.nonce,
      codeVerifier: pending.codeVerifier,
    });
    const sub = stringClaim(grant.claims.sub);
    if (!sub) throw new GatewayError('INVALID_REQUEST', 'The identity provider named no user.');
    // Whatever session cookie the browser had (possibly planted) is ended: the login gets an id of its own.
    for (const old of cookieValuesToEnd(req, SESSION_COOKIE)) await sessions.destroy(old);
    const { revalidatedAt: _, ...grantFields } = grantFrom(grant, undefined, clock.now());
    const { id } = await sessions.create({ sub, sid: stringClaim(grant.claims.sid), ...grantFields });
    setSessionCookie(res, id, deps.maxLifetimeSeconds);
    logger.info({ event: 'session.login', user: userRef(sub) }, 'browser session started');
    res.redirect(303, pending.returnTo);
  });
  router.get('/bff/user', routeName('session-user'), async (req, res) => {
    const refused = refuseCrossSite(req);
    if (refused) throw refused;
    const { id, record } = await sessionOf(req, res);
    revalidation.whenDue(id, record);
    res.json({
      name: record.name ?? null,
      email: record.email ?? null,
      scopes: [...callerOf(record).scopes].sort(),
      expiresAt: new Date(
        Math.min(
          record.lastSeenAt + deps.idleTimeoutSeconds * 1000,
          record.createdAt + deps.maxLifetimeSeconds * 1000,
        ),
      ).toISOString(),
    });
  });
  router.post('/bff/logout', routeName('session-logout'), async (req, res) => {
    const refused = refuseCrossSite(req);
    if (refused) throw refused;
    for (const id of cookieValuesToEnd(req, SESSION_COOKIE)) await sessions.destroy(id);
    clearCookie(res, SESSION_COOKIE);
    const endSession = await rp()
      .endSessionUrl()
      .catch(() => undefined);
    res.json({ loggedOut: true, endSessionUrl: endSession?.href ?? null });
  });
  router.post(
    '/bff/backchannel-logout',
    routeName('session-backchannel-logout'),
    express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 10 }),
    async (req, res) => {
      const token = (req.body as Record<string, unknown> | undefined)?.logout_token;
      const claims =
        typeof token === 'string' && token.length < 16_384 ? await rp().verifyLogoutToken(token) : undefined;
      if (!claims) throw new GatewayError('INVALID_REQUEST', 'The logout token is missing or not valid.');
      // A captured token replayed after the user logged in again must not end the new session.
      const issuer = String(claims.iss);
      const jti = String(claims.jti);
      if (!(await logoutReplays.firstUse(issuer, jti)))
        throw new GatewayError('INVALID_REQUEST', 'This logout token was already used.');
      const ended = await sessions
        .destroyMatching({ sid: stringClaim(claims.sid), sub: stringClaim(claims.sub) })
        .catch(async (error: unknown) => {
          await logoutReplays.forget(issuer, jti).catch(() => undefined);
          throw error;
        });
      logger.info({ event: 'session.backchannel_logout', ended }, 'provider ended sessions');
      res.status(200).json({ ended });
    },
  );
  router.all('/bff/login', routeName('session-login'), methodNotAllowed('GET, HEAD'));
  router.all(CALLBACK_PATH, routeName('session-callback'), methodNotAllowed('GET, HEAD'));
  router.all('/bff/user', routeName('session-user'), methodNotAllowed('GET, HEAD'));
  router.all('/bff/logout', routeName('session-logout'), methodNotAllowed('POST'));
  router.all('/bff/backchannel-logout', routeName('session-backchannel-logout'), methodNotAllowed('POST'));

  return {
    router,
    sessions,
    revalidation,
    carries: (req) => cookieValues(req, SESSION_COOKIE).length > 0,
    authenticate(req, res, next) {
      (async () => {
        const refused = refuseCrossSite(req);
        if (refused) throw refused;
        const { id, record } = await sessionOf(req, res);
        req.caller = callerOf(record);
        revalidation.whenDue(id, record);
      })().then(() => next(), next);
    },
  };
}

/**
 * The same store, its failures (Redis unreachable) turned into 503 answers: a session that cannot be read is neither
 * trusted nor declared ended, and the browser is told to retry rather than to log in again.
 */
function answeringStoreOutages<T extends object>(store: T): T {
  const wrapped = { ...store } as Record<string, unknown>;
  for (const [name, method] of Object.entries(store)) {
    if (typeof method !== 'function') continue;
    wrapped[name] = (...args: unknown[]) => {
      const result = (method as (...a: unknown[]) => unknown).apply(store, args);
      if (!(result instanceof Promise)) return result;
      return result.catch((error: unknown) => {
        throw new GatewayError(
          'UPSTREAM_UNAVAILABLE',
          'The session store cannot be reached; try again shortly.',
          {
            status: 503,
            headers: { 'Retry-After': '1' },
            cause: error,
          },
        );
      });
    };
  }
  return wrapped as T;
}

/** The browser's login binding when it is one the gateway made (32 random bytes, base64url); else undefined. */
function reusableBinding(value: string | undefined): string | undefined {
  return value !== undefined && /^[A-Za-z0-9_-]{43}$/.test(value) ? value : undefined;
}

/** The query string (the app's query parser is off: nothing is parsed unless a route asks). */
function queryOf(req: Request): URLSearchParams {
  const at = req.originalUrl.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : req.originalUrl.slice(at + 1));
}

function stringClaim(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 && value.length <= 256 ? value : undefined;
}

/** The claim's values: a list of strings, or one string; anything else grants nothing. */
function claimValues(claims: JWTPayload, claim: string): string[] {
  const value = claims[claim];
  if (typeof value === 'string') return [value];
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string').slice(0, 256) : [];
}
