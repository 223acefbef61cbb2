// Authentication by the session cookie: the CSRF checks, then the live session the cookie names.
import type { Request, Response } from 'express';
import { GatewayError } from '../http/gateway-error';
import { clearCookie, SESSION_COOKIE, singleCookie } from './cookies';
import type { OpenSession, SessionStore } from './session-store';

const LOGIN_HINT = 'The session has ended or is not valid: log in again at /bff/login.';

export interface CookieAuthentication {
  /** The session of a request that passes the CSRF checks; throws the GatewayError to answer otherwise. */
  sessionOf(req: Request, res: Response): Promise<OpenSession>;
}

/** `publicOrigin` is the gateway's own origin, asked per request (local mode knows it only once it listens). */
export function createCookieAuthentication(
  sessions: Pick<SessionStore, 'open'>,
  publicOrigin: () => string,
): CookieAuthentication {
  return {
    async sessionOf(req, res) {
      const refused = refuseCrossSite(req, publicOrigin);
      if (refused) throw refused;
      const id = singleCookie(req, SESSION_COOKIE);
      const open = id === undefined ? undefined : await sessions.open(id);
      if (!open) throw unauthenticated(res);
      return open;
    },
  };
}

/** 403 unless the request proves it comes from the gateway's own pages (a cross-site form cannot set X-CSRF). */
export function refuseCrossSite(req: Request, publicOrigin: () => string): GatewayError | undefined {
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
  if (origin === publicOrigin()) return undefined;
  return new GatewayError('CLIENT_FORBIDDEN', 'This origin may not use the session cookie.');
}

function unauthenticated(res: Response): GatewayError {
  clearCookie(res, SESSION_COOKIE);
  return new GatewayError('CLIENT_UNAUTHENTICATED', LOGIN_HINT, {
    headers: { Link: '</bff/login>; rel="login"' },
  });
}
