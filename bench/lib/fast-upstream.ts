// A minimal upstream for the benchmark: plain node:http answering the two operations and the token endpoints with
// fixed JSON, no validation work, so the proxies' own cost is what the load measures. Run as its own process:
//   FAST_PORT=0 [FAST_LATENCY_MS=150] [FAST_CERT_FILE=cert.pem FAST_KEY_FILE=key.pem] node dist/bench/lib/fast-upstream.js
// It prints its URL, and counts what it served at GET /__simulator/stats (the simulator's counter names).
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const PLAN_PREFIX = '/api/subscriptions/plan/';
const latencyMs = Number(process.env.FAST_LATENCY_MS ?? 0);

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const PLAN = json({
  internalId: PLAN_ID,
  name: 'Bench plan',
  amount: 1000,
  currency: 'ARS',
  status: { code: '100', description: 'ACTIVE', detail: 'The plan is active' },
});
const PLAN_NOT_FOUND = json({
  status: { code: '400', description: 'ERROR', detail: 'Plan subscription not found' },
});
const VALID = json({ code: '200', description: 'Valid id and type document' });
const NOT_FOUND = json({ detail: 'Not found.' });

/** An unsigned JWT whose `exp` the gateway reads (it never verifies upstream tokens); valid for a day. */
function token(type: 'access' | 'refresh'): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const exp = Math.floor(Date.now() / 1000) + 86_400;
  return `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ token_type: type, exp, jti: Math.random().toString(16).slice(2) })}.c2ln`;
}

const stats = {
  requests: 0,
  planReads: 0,
  validations: 0,
  logins: 0,
  refreshes: 0,
  tlsHandshakes: 0,
  connections: 0,
};

function send(res: ServerResponse, status: number, body: Buffer): void {
  const answer = () => {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  };
  if (latencyMs > 0) setTimeout(answer, latencyMs);
  else answer();
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  // Bodies are read and dropped: the answer is fixed.
  req.resume();
  req.once('end', () => {
    if (url === '/__simulator/stats') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
      return;
    }
    stats.requests += 1;
    if (req.method === 'GET' && url.startsWith(PLAN_PREFIX)) {
      stats.planReads += 1;
      const known = url.slice(PLAN_PREFIX.length) === PLAN_ID;
      send(res, known ? 200 : 404, known ? PLAN : PLAN_NOT_FOUND);
    } else if (req.method === 'POST' && url === '/api/validation/document') {
      stats.validations += 1;
      send(res, 200, VALID);
    } else if (req.method === 'POST' && url === '/api/token/') {
      stats.logins += 1;
      send(res, 200, json({ refresh: token('refresh'), access: token('access') }));
    } else if (req.method === 'POST' && url === '/api/token/refresh/') {
      stats.refreshes += 1;
      send(res, 200, json({ access: token('access') }));
    } else send(res, 404, NOT_FOUND);
  });
}

const certFile = process.env.FAST_CERT_FILE;
const keyFile = process.env.FAST_KEY_FILE;
const server =
  certFile && keyFile
    ? createHttpsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, handle)
    : createHttpServer(handle);
// TLS sessions set up: a proxy that keeps its upstream connections alive makes about one per socket, not per request.
server.on('secureConnection', () => {
  stats.tlsHandshakes += 1;
});
// TCP connections accepted: a proxy whose keep-alive pool holds makes about one per socket, not per request.
server.on('connection', () => {
  stats.connections += 1;
});
// Like the simulator (Node's defaults): 5 s keep-alive, no limit on requests per connection.
server.keepAliveTimeout = 5_000;
// FAST_LISTEN_BACKLOG: a proxy opening hundreds of upstream sockets at once must not wait on this queue.
const backlog = process.env.FAST_LISTEN_BACKLOG ? Number(process.env.FAST_LISTEN_BACKLOG) : undefined;
server.listen({ port: Number(process.env.FAST_PORT ?? 0), host: '127.0.0.1', backlog }, () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`fast-upstream listening on ${certFile ? 'https' : 'http'}://127.0.0.1:${port}\n`);
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
