// The reference a team would hand-write instead of the gateway: Express + http-proxy-middleware, a keep-alive
// agent and a static bearer header obtained once. No caller auth, no limits, no validation, no token refresh,
// no logging, no metrics. Run as its own process by bench/run.ts:
//   BARE_PORT=0 BARE_TARGET=http://127.0.0.1:4010 BARE_TOKEN=<access token> [BARE_MAX_SOCKETS=256] \
//   node dist/bench/bare-proxy.js        (an https target is trusted through NODE_EXTRA_CA_CERTS)
import express from 'express';
import { bareForwarding, listenOnBarePort } from './lib/bare-forwarding';

const target = process.env.BARE_TARGET;
const token = process.env.BARE_TOKEN;
if (!target || !token) {
  process.stderr.write('bare-proxy: set BARE_TARGET and BARE_TOKEN\n');
  process.exit(1);
}

const app = express();
app.use(bareForwarding(target, token));
listenOnBarePort(app, 'bare-proxy');
