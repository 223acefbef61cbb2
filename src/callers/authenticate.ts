// Who is calling: an X-API-Key from the registry or an SSO bearer token, attached as req.caller; and per-route scopes.
import type { RequestHandler } from 'express';
import { GatewayError } from '../http/gateway-error';
import type { Scope } from './caller';
import type { ClientRegistry } from './client-registry';
import type { OidcVerifier } from './oidc-verifier';

export interface AuthenticateOptions {
  readonly registry: Pick<ClientRegistry, 'findByApiKey'>;
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
      const caller = typeof apiKey === 'string' ? registry.findByApiKey(apiKey) : undefined;
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
