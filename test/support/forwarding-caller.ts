// A gateway-shaped Express app around one forwarder, for tests that drive the forwarder against a misbehaving
// provider: GET/POST /read and /write forward a read (GET) or a write (POST with a small JSON body) to /api/thing and
// send the answer; GET /stream pipes it (`answer: "stream"`). A failure carries `x-upstream-unknown` (what the
// forwarder told the idempotency layer) and the gateway's own error envelope.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { type Forwarder, type StreamForwarder, sendAnswer } from '../../src/forwarding';
import { errorEnvelopeHandler } from '../../src/http/error-envelope';
import type { TokenProvider } from '../../src/tokens';

const STATIC_TOKEN = {
  value: 'static-upstream-token',
  expiresAt: Date.now() + 300_000,
  source: 'memory',
} as const;

/** A token provider that always has the same valid token, for tests about something other than tokens. */
export const STATIC_TOKENS: TokenProvider = {
  getAccessToken: async () => STATIC_TOKEN,
  renewAfterRejection: async () => STATIC_TOKEN,
  status: () => ({}) as ReturnType<TokenProvider['status']>,
  start: async () => undefined,
  stop: async () => undefined,
};

export interface ForwardingCallerOptions {
  /** The request id every forwarded call carries. */
  readonly requestId: string;
  /** The exchange's own timeout (x-gateway.timeoutMs); the forwarder's when absent. */
  readonly timeoutMs?: number;
}

/** Serves the app on an ephemeral loopback port; its closer goes to `closers`. */
export async function serveForwardingCaller(
  forwarder: Forwarder & Partial<StreamForwarder>,
  options: ForwardingCallerOptions,
  closers: (() => unknown)[],
): Promise<string> {
  const app = express();
  app.get('/stream', async (req, res, next) => {
    req.id = options.requestId;
    try {
      if (!forwarder.stream) throw new Error('this forwarder pipes nothing');
      await forwarder.stream(req, res, { route: 'thing', method: 'GET', path: '/api/thing' });
    } catch (error) {
      next(error);
    }
  });
  app.all('/:verb', async (req, res, next) => {
    req.id = options.requestId;
    const write = req.params.verb === 'write';
    try {
      const answer = await forwarder.forward(req, res, {
        route: 'thing',
        method: write ? 'POST' : 'GET',
        path: '/api/thing',
        ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
        ...(write && { body: Buffer.from('{"a":1}') }),
      });
      sendAnswer(res, answer);
    } catch (error) {
      res.setHeader('x-upstream-unknown', String(res.locals.upstreamUnknown === true));
      next(error);
    }
  });
  app.use(errorEnvelopeHandler());
  const server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
