// Who is calling: an X-API-Key from the registry or an SSO bearer token, attached as req.caller; and per-route scopes.
import type { Socket } from 'node:net';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { GatewayError } from '../http/gateway-error';
import type { AuthFailureLimit } from './auth-failure-limit';
import type { Caller, Scope } from './caller';
import type { ClientRegistry } from './client-registry';
import { isIssuerUnavailable, type OidcVerifier } from './oidc-verifier';

export interface AuthenticateOptions {
  readonly registry: Pick<ClientRegistry, 'findByApiKey' | 'findById'>;
  /** Absent when OIDC_ISSUER is not configured: bearer tokens are then refused. */
  readonly oidc?: OidcVerifier;
  /** Counts failures per client IP and blocks floods; absent, every failure is a plain 401. */
  readonly failures?: AuthFailureLimit;
  /** Browser sessions: a request with the session cookie and no other credential is authenticated by it. */
  readonly sessions?: {
    /** Whether the request carries the session cookie (nothing looked up yet). */
    carries(req: Request): boolean;
    authenticate(req: Request, res: Response, next: NextFunction): void;
  };
  /** The clock of the per-connection re-check after a failure (tests). Default Date.now. */
  readonly now?: () => number;
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * 401 CLIENT_UNAUTHENTICATED unless the request carries a valid credential. X-API-Key wins when both are sent
 * (a service may forward its user's Authorization header). Details say what is wrong, never what was sent.
 *
 * From a client IP blocked for failed authentications (see {@link AuthFailureLimit}) a request is refused 429 with
 * nothing hashed or verified when it carries no usable credential, or when its credential is not the valid key
 * this connection presented before and an authentication from this IP failed on this connection within the last
 * second. So a flood costs at most one verification per connection and second, while a valid caller on its own
 * connection is always verified (its remembered key not even hashed) and never locked out by someone else's key.
 * A valid SSO token of a client the registry does not admit (403) is no failed authentication of the address.
 */
export function authenticate(options: AuthenticateOptions): RequestHandler {
  const { registry, oidc, failures } = options;
  const now = options.now ?? Date.now;
  // Built once, not per request: whether the IP is blocked is asked only on the way to a refusal or a verification,
  // so valid callers on their remembered connection never pay for it.
  const fail = (req: Request, res: Response, next: NextFunction, detail: string | GatewayError): void => {
    const error = typeof detail === 'string' ? new GatewayError('CLIENT_UNAUTHENTICATED', detail) : detail;
    if (!failures) {
      next(error);
      return;
    }
    rememberFailure(req, now());
    if (failures.isBlocked(req)) failures.refuse(req, res, next);
    else failures.failed(req, res, next, error);
  };
  /** Refuses without verifying when this IP is blocked and failed on this connection within the last second. */
  const refusedUnverified = (req: Request, res: Response, next: NextFunction): boolean => {
    if (!failures || !failedOnThisConnection(req, now()) || !failures.isBlocked(req)) return false;
    failures.refuse(req, res, next);
    return true;
  };

  return (req, res, next) => {
    const apiKey = req.headers['x-api-key'];
    if (apiKey !== undefined) {
      if (typeof apiKey !== 'string') return fail(req, res, next, 'The API key is not valid.');
      const remembered = rememberedCaller(registry, req, apiKey);
      if (remembered) {
        req.caller = remembered;
        next();
        return;
      }
      if (refusedUnverified(req, res, next)) return;
      const caller = lookUpAndRemember(registry, req, apiKey);
      if (!caller) return fail(req, res, next, 'The API key is not valid.');
      req.caller = caller;
      next();
      return;
    }
    const authorization = req.headers.authorization;
    if (authorization === undefined && options.sessions?.carries(req)) {
      // A guessed session id fails like a wrong key: counted per address, and a blocked address costs no lookup.
      if (refusedUnverified(req, res, next)) return;
      options.sessions.authenticate(req, res, (error?: unknown) => {
        if (error instanceof GatewayError && error.reason === 'CLIENT_UNAUTHENTICATED')
          fail(req, res, next, error);
        else next(error as Error | undefined);
      });
      return;
    }
    if (authorization === undefined) {
      return fail(
        req,
        res,
        next,
        oidc
          ? 'The request carries no credential: send an X-API-Key header or Authorization: Bearer <token>.'
          : 'The request carries no credential: send an X-API-Key header.',
      );
    }
    const token = BEARER.exec(authorization)?.[1];
    if (token === undefined) return fail(req, res, next, 'The Authorization header is not a Bearer token.');
    if (!oidc) return fail(req, res, next, 'Bearer tokens are not accepted here: send an X-API-Key header.');
    if (refusedUnverified(req, res, next)) return;
    oidc.verify(token).then(
      (caller) => {
        req.caller = caller;
        next();
      },
      (error: unknown) => {
        if (!(error instanceof GatewayError) || error.reason === 'CLIENT_FORBIDDEN') next(error);
        // The issuer being down is the operator's problem, not a failure of this caller's credential.
        else if (!isIssuerUnavailable(error)) fail(req, res, next, error);
        else if (failures) failures.unverified(req, res, next, error);
        else next(error);
      },
    );
  };
}

/**
 * While its IP is blocked, a connection on which an authentication from that IP failed gets at most one
 * verification per second: a flood on it costs that little, and a caller that fixed its own key (or shares a proxy's
 * pooled connection with the flood) is verified again within a second instead of waiting for the block to end.
 */
const RECHECK_AFTER_FAILURE_MS = 1_000;

/** The client IP whose authentication last failed on a connection (a proxy's connection carries several), and when. */
const FAILED_FOR = Symbol('authenticationFailedFor');
type RemembersFailure = Socket & { [FAILED_FOR]?: { readonly ip: string | undefined; readonly at: number } };

function rememberFailure(req: Request, now: number): void {
  (req.socket as RemembersFailure)[FAILED_FOR] = { ip: req.ip, at: now };
}

function failedOnThisConnection(req: Request, now: number): boolean {
  const failure = (req.socket as RemembersFailure)[FAILED_FOR];
  return failure !== undefined && now - failure.at < RECHECK_AFTER_FAILURE_MS && failure.ip === req.ip;
}

/** The key a keep-alive connection last presented, and the client it named. */
const REMEMBERED_KEY = Symbol('rememberedApiKey');
type RemembersKey = Socket & { [REMEMBERED_KEY]?: { readonly key: string; readonly caller: Caller } };

/**
 * The registry lookup hashes the key (SHA-256) on every call. A connection presents the same key request after
 * request, so it remembers the last key that was valid and whom it named: the next request with that key skips the
 * hash. The remembered client holds only while the registry still has that very entry (a reload builds new ones, so
 * a revoked or rotated key is looked up again and refused), and the keys are compared in constant time, so a
 * connection shared by several callers (a proxy in front) tells no caller anything about another's key.
 */
function rememberedCaller(
  registry: AuthenticateOptions['registry'],
  req: Request,
  key: string,
): Caller | undefined {
  const remembered = (req.socket as RemembersKey)[REMEMBERED_KEY];
  if (
    remembered &&
    equalInConstantTime(remembered.key, key) &&
    registry.findById(remembered.caller.id) === remembered.caller
  )
    return remembered.caller;
  return undefined;
}

/** The registry lookup (the hash); a valid key is remembered on the connection. */
function lookUpAndRemember(
  registry: AuthenticateOptions['registry'],
  req: Request,
  key: string,
): Caller | undefined {
  const caller = registry.findByApiKey(key);
  if (caller) (req.socket as RemembersKey)[REMEMBERED_KEY] = { key, caller };
  return caller;
}

/** Compares every character whatever the first difference (the lengths of keys are no secret). */
function equalInConstantTime(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}

/** 403 CLIENT_FORBIDDEN when the authenticated caller lacks the route's scope. */
export function requireScope(scope: Scope): RequestHandler {
  return (req, _res, next) => {
    const caller = req.caller;
    if (!caller) {
      next(new GatewayError('CLIENT_UNAUTHENTICATED', 'The request carries no credential.'));
      return;
    }
    if (!caller.scopes.has(scope)) {
      next(
        new GatewayError(
          'CLIENT_FORBIDDEN',
          `The client "${caller.id}" lacks the scope "${scope}" this route requires.`,
        ),
      );
      return;
    }
    next();
  };
}
