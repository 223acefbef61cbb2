// A tiny Express app around the middleware under test: request id first, the error envelope last.
import express, { type RequestHandler } from 'express';
import pino from 'pino';
import { errorEnvelopeHandler } from '../../../../src/http/error-envelope';
import { requestId } from '../../../../src/http/request-id';

export function testApp(...middleware: RequestHandler[]): express.Express {
  const app = express();
  app.disable('x-powered-by');
  const log = pino({ level: 'silent' });
  app.use(requestId());
  app.use((req, _res, next) => {
    req.log = log;
    next();
  });
  app.use(...middleware);
  app.all('/{*path}', (req, res) => {
    res.json({ ok: true, caller: req.caller ? { id: req.caller.id, via: req.caller.via } : null });
  });
  app.use(errorEnvelopeHandler());
  return app;
}

/** Collects log lines (objects) written through a pino-like logger. */
export function memoryLogger() {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = [];
  const at =
    (level: string) =>
    (fields: Record<string, unknown>, message: string): void => {
      lines.push({ level, fields, message });
    };
  return { lines, info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') };
}
