// What the bare proxy is, shared with the stack proxy so that the two differ only by the stack's libraries: the
// forwarding middleware (http-proxy-middleware, a keep-alive agent, a static bearer header) and the loopback listener.
import { Agent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Express, RequestHandler } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';

/** Forwards every request to `target` with `Authorization: Bearer <token>` (BARE_MAX_SOCKETS upstream sockets). */
export function bareForwarding(target: string, token: string): RequestHandler {
  const agentOptions = { keepAlive: true, maxSockets: Number(process.env.BARE_MAX_SOCKETS ?? 256) };
  return createProxyMiddleware({
    target,
    changeOrigin: true,
    agent: target.startsWith('https:') ? new HttpsAgent(agentOptions) : new Agent(agentOptions),
    headers: { authorization: `Bearer ${token}` },
  });
}

/**
 * Serves `app` on 127.0.0.1:BARE_PORT (with a listen backlog of BARE_LISTEN_BACKLOG, the gateway's by default in the
 * benchmark: a burst of new connections then waits in the same queue for each proxy) and says so on stdout (`<name> listening on <url>`); SIGTERM closes every
 * connection and runs `beforeExit` (default: nothing) before the process exits.
 */
export function listenOnBarePort(app: Express, name: string, beforeExit?: () => Promise<void>): void {
  const backlog = process.env.BARE_LISTEN_BACKLOG ? Number(process.env.BARE_LISTEN_BACKLOG) : undefined;
  const server = app.listen({ port: Number(process.env.BARE_PORT ?? 0), host: '127.0.0.1', backlog }, () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`${name} listening on http://127.0.0.1:${port}\n`);
  });
  process.once('SIGTERM', () => {
    server.close();
    server.closeAllConnections();
    void (beforeExit?.() ?? Promise.resolve()).finally(() => process.exit(0));
  });
}
