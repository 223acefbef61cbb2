// Who is calling: an X-API-Key from the registry or an SSO bearer token, attached as req.caller; and per-route scopes.
import type { Socket } from 'node:net';
import type { Request, RequestHandler } from 'express';
import { GatewayError } from '../http/gateway-error';
import type { Caller, Scope } from './caller';
import type { ClientRegistry } from './client-registry';
import type { OidcVerifier } from './oidc-verifier';

export interface AuthenticateOptions {
  readonly registry: Pick<ClientRegistry, 'findByApiKey' | 'findById'>;
  /** Absent when OIDC_ISSUER is not configured: bearer tokens are then refused. */
  readonly oidc?: OidcVerifier;
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * 401 CLIENT_UNAUTHENTICATED unless the request carries a valid credential. X-API-Key wins when both are sent
 * (a service may forward its user's Authorization header). Details say what is wrong, never what was sent.
 */
export function authenticate(options: AuthenticateOptions): RequestHandler {
  const { registry, oidc } = options;
  return (req, _res, next) => {
    const apiKey = req.headers['x-api-key'];
    if (apiKey !== undefined) {
      const caller = typeof apiKey === 'string' ? callerOfKey(registry, req, apiKey) : undefined;
      if (!caller) {
        next(new GatewayError('CLIENT_UNAUTHENTICATED', 'The API key is not valid.'));
        return;
      }
      req.caller = caller;
      next();
      return;
    }
    const authorization = req.headers.authorization;
    if (authorization === undefined) {
      next(
        new GatewayError(
          'CLIENT_UNAUTHENTICATED',
          oidc
            ? 'The request carries no credential: send an X-API-Key header or Authorization: Bearer <token>.'
            : 'The request carries no credential: send an X-API-Key header.',
        ),
      );
      return;
    }
    const token = BEARER.exec(authorization)?.[1];
    if (token === undefined) {
      next(new GatewayError('CLIENT_UNAUTHENTICATED', 'The Authorization header is not a Bearer token.'));
      return;
    }
    if (!oidc) {
      next(
        new GatewayError(
          'CLIENT_UNAUTHENTICATED',
          'Bearer tokens are not accepted here: send an X-API-Key header.',
        ),
      );
      return;
    }
    oidc.verify(token).then(
      (caller) => {
        req.caller = caller;
        next();
      },
      (error: unknown) => next(error),
    );
  };
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
function callerOfKey(
  registry: AuthenticateOptions['registry'],
  req: Request,
  key: string,
): Caller | undefined {
  const connection = req.socket as RemembersKey;
  const remembered = connection[REMEMBERED_KEY];
  if (
    remembered &&
    equalInConstantTime(remembered.key, key) &&
    registry.findById(remembered.caller.id) === remembered.caller
  )
    return remembered.caller;
  const caller = registry.findByApiKey(key);
  if (caller) connection[REMEMBERED_KEY] = { key, caller };
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
