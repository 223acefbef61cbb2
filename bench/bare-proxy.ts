// The reference a team would hand-write instead of the gateway: Express + http-proxy-middleware, a keep-alive
// agent and a static bearer header obtained once. No caller auth, no limits, no validation, no token refresh,
// no logging, no metrics. Run as its own process by bench/run.ts:
//   BARE_PORT=0 BARE_TARGET=http://127.0.0.1:4010 BARE_TOKEN=<access token> [BARE_MAX_SOCKETS=256] \
//   node dist/bench/bare-proxy.js        (an https target is trusted through NODE_EXTRA_CA_CERTS)
import { Agent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';

const target = process.env.BARE_TARGET;
const token = process.env.BARE_TOKEN;
if (!target || !token) {
  process.stderr.write('bare-proxy: set BARE_TARGET and BARE_TOKEN\n');
  process.exit(1);
}

const agentOptions = { keepAlive: true, maxSockets: Number(process.env.BARE_MAX_SOCKETS ?? 256) };
const app = express();
app.use(
  createProxyMiddleware({
    target,
    changeOrigin: true,
    agent: target.startsWith('https:') ? new HttpsAgent(agentOptions) : new Agent(agentOptions),
    headers: { authorization: `Bearer ${token}` },
  }),
);

const server = app.listen(Number(process.env.BARE_PORT ?? 0), '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`bare-proxy listening on http://127.0.0.1:${port}\n`);
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
