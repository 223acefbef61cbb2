// Keeps a well-formed incoming X-Request-Id or makes one, and puts it on the answer before anything else runs.
import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';

/** Printable, header-safe and short: anything else is replaced rather than echoed back. */
const VALID_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's X-Request-Id when it is well-formed, else a new one. */
export function requestIdOf(incoming: string | string[] | undefined): string {
  return typeof incoming === 'string' && VALID_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** Gives the request its id (the caller's, when well-formed) and echoes it on the answer. */
export function assignRequestId(req: Request, res: Response): void {
  const id = requestIdOf(req.headers['x-request-id']);
  req.id = id;
  req.headers['x-request-id'] = id;
  res.setHeader('x-request-id', id);
}

/** The id alone as a middleware (the gateway runs it inside requestContext). */
export function requestId(): RequestHandler {
  return (req, res, next) => {
    assignRequestId(req, res);
    next();
  };
}
