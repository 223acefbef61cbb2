// Answers for requests no route takes: 404 for unknown paths, 405 with Allow for known paths and other methods.
import type { RequestHandler } from 'express';
import { GatewayError } from './gateway-error';

export function methodNotAllowed(allow: string): RequestHandler {
  return (req, _res, next) => {
    next(
      new GatewayError('METHOD_NOT_ALLOWED', `${req.method} is not supported on this path.`, {
        headers: { allow },
      }),
    );
  };
}

export function notFound(): RequestHandler {
  return (_req, _res, next) => {
    next(new GatewayError('NOT_FOUND', 'No such route on this gateway.'));
  };
}
