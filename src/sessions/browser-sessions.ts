// Browser sessions (backend-for-frontend): the /bff/* routes and the cookie authentication of the two operations.
import type { NextFunction, Request, Response, Router } from 'express';
import type { Logger } from 'pino';
import type { ClientRegistry } from '../callers/client-registry';
import { GatewayError } from '../http/gateway-error';
import type { Clock, RecordSeal, TokenStore } from '../tokens';
import { createCookieAuthentication } from './cookie-authentication';
import { cookieValues, SESSION_COOKIE } from './cookies';
import { createLoginStates } from './login-state';
import { createLogoutReplays } from './logout-replays';
import type { RelyingParty } from './relying-party';
import { createRevalidation, type Revalidation } from './revalidation';
import { createSessionCaller } from './session-caller';
import type { SessionIndex } from './session-index';
import { createSessionRouter } from './session-routes';
import { createSessionStore, type SessionStore } from './session-store';
import { loginsAnsweringOutages, replaysAnsweringOutages, sessionsAnsweringOutages } from './store-outages';

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

/** Composes the parts of browser sessions: stores answering outages, the caller mapping, cookie authentication, routes. */
export function createBrowserSessions(deps: BrowserSessionsDeps): BrowserSessions {
  const { clock, logger } = deps;
  const sessions = sessionsAnsweringOutages(
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
  const relyingParty = (): RelyingParty => {
    const current = deps.relyingParty();
    if (!current)
      throw new GatewayError('UPSTREAM_UNAVAILABLE', 'Browser sessions are starting; try again shortly.');
    return current;
  };
  const caller = createSessionCaller({ registry: deps.registry, relyingParty, userKey: deps.userKey });
  const revalidation = createRevalidation({
    sessions,
    store: deps.store,
    relyingParty: deps.relyingParty,
    clock,
    logger,
    intervalMs: deps.revalidateSeconds * 1000,
    lockTtlMs: deps.lockTtlMs,
    grantFrom: caller.grantFrom,
  });
  const authentication = createCookieAuthentication(sessions, () => relyingParty().settings.publicOrigin);
  const router = createSessionRouter({
    sessions,
    logins: loginsAnsweringOutages(createLoginStates(deps.store, deps.seal, deps.keyPrefix)),
    logoutReplays: replaysAnsweringOutages(createLogoutReplays(deps.store, deps.keyPrefix)),
    authentication,
    caller,
    revalidation,
    relyingParty,
    clock,
    logger,
    maxLifetimeSeconds: deps.maxLifetimeSeconds,
  });
  return {
    router,
    sessions,
    revalidation,
    carries: (req) => cookieValues(req, SESSION_COOKIE).length > 0,
    authenticate(req, res, next) {
      authentication
        .sessionOf(req, res)
        .then(({ id, record }) => {
          req.caller = caller.callerOf(record);
          revalidation.whenDue(id, record);
        })
        .then(() => next(), next);
    },
  };
}
