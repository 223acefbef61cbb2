// The /bff/* routes: login, the provider's callback, the signed-in user, logout and the provider's back-channel logout.
import express, { type Request, type RequestHandler, type Router } from 'express';
import type { Logger } from 'pino';
import { GatewayError } from '../http/gateway-error';
import { methodNotAllowed } from '../http/unmatched';
import { routeName } from '../observability/request-log';
import type { Clock } from '../tokens';
import { type CookieAuthentication, refuseCrossSite } from './cookie-authentication';
import {
  clearCookie,
  cookieValuesToEnd,
  LOGIN_COOKIE,
  SESSION_COOKIE,
  setLoginCookie,
  setSessionCookie,
  singleCookie,
} from './cookies';
import { bindingOf, LOGIN_TTL_SECONDS, type LoginStates } from './login-state';
import type { LogoutReplays } from './logout-replays';
import { randomValue } from './random-values';
import { CALLBACK_PATH, type RelyingParty } from './relying-party';
import { safeReturnTo } from './return-to';
import type { Revalidation } from './revalidation';
import { type SessionCaller, stringClaim } from './session-caller';
import type { SessionStore } from './session-store';

export interface SessionRoutesDeps {
  readonly sessions: SessionStore;
  readonly logins: LoginStates;
  readonly logoutReplays: LogoutReplays;
  readonly authentication: CookieAuthentication;
  readonly caller: SessionCaller;
  readonly revalidation: Revalidation;
  /** The relying party; throws while it is not known yet. */
  readonly relyingParty: () => RelyingParty;
  readonly clock: Pick<Clock, 'now'>;
  readonly logger: Logger;
  readonly maxLifetimeSeconds: number;
}

export function createSessionRouter(deps: SessionRoutesDeps): Router {
  const router = express.Router();
  router.get('/bff/login', routeName('session-login'), login(deps));
  router.get(CALLBACK_PATH, routeName('session-callback'), callback(deps));
  router.get('/bff/user', routeName('session-user'), user(deps));
  router.post('/bff/logout', routeName('session-logout'), logout(deps));
  router.post(
    '/bff/backchannel-logout',
    routeName('session-backchannel-logout'),
    express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 10 }),
    backchannelLogout(deps),
  );
  router.all('/bff/login', routeName('session-login'), methodNotAllowed('GET, HEAD'));
  router.all(CALLBACK_PATH, routeName('session-callback'), methodNotAllowed('GET, HEAD'));
  router.all('/bff/user', routeName('session-user'), methodNotAllowed('GET, HEAD'));
  router.all('/bff/logout', routeName('session-logout'), methodNotAllowed('POST'));
  router.all('/bff/backchannel-logout', routeName('session-backchannel-logout'), methodNotAllowed('POST'));
  return router;
}

/** GET /bff/login: remembers the login's checks server-side and sends the browser to the provider. */
function login({ relyingParty, logins }: SessionRoutesDeps): RequestHandler {
  return async (req, res) => {
    const rp = relyingParty();
    const returnTo = safeReturnTo(queryOf(req).get('returnTo'), rp.settings.publicOrigin);
    if (returnTo === undefined)
      throw new GatewayError('INVALID_REQUEST', 'returnTo must be a path on this site.', {
        errors: [{ path: 'returnTo', message: 'must be a relative path starting with a single /' }],
      });
    const state = randomValue();
    const nonce = randomValue();
    const codeVerifier = randomValue();
    // One binding per browser, kept across logins: a second tab's login must not orphan the first tab's.
    const browser = reusableBinding(singleCookie(req, LOGIN_COOKIE)) ?? randomValue();
    const url = await rp.authorizationUrl({ state, nonce, codeVerifier });
    await logins.save(state, { codeVerifier, nonce, returnTo, binding: bindingOf(browser) });
    setLoginCookie(res, browser, LOGIN_TTL_SECONDS);
    res.redirect(303, url.href);
  };
}

/** GET /bff/callback: finishes the login started in this browser and starts its session under a fresh id. */
function callback(deps: SessionRoutesDeps): RequestHandler {
  const { relyingParty, logins, sessions, caller, clock, logger } = deps;
  return async (req, res) => {
    // A HEAD (a link checker, a prefetch) must not spend the one use of the login's state.
    if (req.method !== 'GET')
      throw new GatewayError('METHOD_NOT_ALLOWED', 'Only GET finishes a login.', {
        headers: { allow: 'GET' },
      });
    const rp = relyingParty();
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
    const callbackUrl = new URL(req.originalUrl, rp.settings.publicOrigin);
    const grant = await rp.exchange(callbackUrl, {
      state,
      nonce: pending.nonce,
      codeVerifier: pending.codeVerifier,
    });
    const sub = stringClaim(grant.claims.sub);
    if (!sub) throw new GatewayError('INVALID_REQUEST', 'The identity provider named no user.');
    // Whatever session cookie the browser had (possibly planted) is ended: the login gets an id of its own.
    for (const old of cookieValuesToEnd(req, SESSION_COOKIE)) await sessions.destroy(old);
    const { revalidatedAt: _, ...grantFields } = caller.grantFrom(grant, undefined, clock.now());
    const { id } = await sessions.create({ sub, sid: stringClaim(grant.claims.sid), ...grantFields });
    setSessionCookie(res, id, deps.maxLifetimeSeconds);
    logger.info({ event: 'session.login', user: caller.userRef(sub) }, 'browser session started');
    res.redirect(303, pending.returnTo);
  };
}

/** GET /bff/user: who is signed in, with the scopes the session grants and when it ends if unused. */
function user(deps: SessionRoutesDeps): RequestHandler {
  const { authentication, revalidation, caller, sessions } = deps;
  return async (req, res) => {
    const { id, record } = await authentication.sessionOf(req, res);
    revalidation.whenDue(id, record);
    res.json({
      name: record.name ?? null,
      email: record.email ?? null,
      scopes: [...caller.callerOf(record).scopes].sort(),
      expiresAt: new Date(sessions.endOf(record)).toISOString(),
    });
  };
}

/**
 * POST /bff/logout: ends the session and names the provider's end-session endpoint, when it has one: the link to
 * follow, with the session's ID token as id_token_hint (SESSION_END_SESSION_METHOD=get, the default), or a link
 * without it and the form to POST there with it (post; docs/browser-sessions in the README).
 */
function logout({ relyingParty, sessions }: SessionRoutesDeps): RequestHandler {
  return async (req, res) => {
    const refused = refuseCrossSite(req, () => relyingParty().settings.publicOrigin);
    if (refused) throw refused;
    const current = singleCookie(req, SESSION_COOKIE);
    // The hint is a courtesy to the provider: a store outage ends the session without it, not the logout.
    const idToken = current ? (await sessions.peek(current).catch(() => undefined))?.idToken : undefined;
    for (const id of cookieValuesToEnd(req, SESSION_COOKIE)) await sessions.destroy(id);
    clearCookie(res, SESSION_COOKIE);
    const endSession = await relyingParty()
      .endSession(idToken)
      .catch(() => undefined);
    res.json({
      loggedOut: true,
      endSessionUrl: endSession?.url.href ?? null,
      endSessionForm: endSession?.form ?? null,
    });
  };
}

/** POST /bff/backchannel-logout: the provider ends sessions with a signed logout token, each token once. */
function backchannelLogout({
  relyingParty,
  sessions,
  logoutReplays,
  logger,
}: SessionRoutesDeps): RequestHandler {
  return async (req, res) => {
    const token = (req.body as Record<string, unknown> | undefined)?.logout_token;
    const claims =
      typeof token === 'string' && token.length < 16_384
        ? await relyingParty().verifyLogoutToken(token)
        : undefined;
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
  };
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
