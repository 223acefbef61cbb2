// The bare proxy plus the libraries every request of the gateway crosses, configured as the gateway configures them,
// and nothing of the gateway's own: helmet (the gateway's JSON-API profile), express-rate-limit (draft-7 headers, its
// memory store), one pino request line to a file and one prom-client latency observation (the gateway's logger and
// request observer), and an API key compared as a string. No tokens, validation, provider accounts, budget, quota,
// ledger, buffering, coalescing or circuit breaker. What the required stack alone costs over the bare proxy: the
// ceiling of the gateway's throughput against it (bench/README.md). Run as its own process by bench/run.ts:
//   BARE_PORT=0 BARE_TARGET=http://127.0.0.1:4010 BARE_TOKEN=<access token> STACK_API_KEY=<key> \
//   STACK_LOG_FILE=/tmp/stack.log [BARE_MAX_SOCKETS=256] node dist/bench/stack-proxy.js
import express, { type RequestHandler } from 'express';
import { rateLimit } from 'express-rate-limit';
import type { Caller } from '../src/callers/caller';
import { securityHeaders } from '../src/http/security-headers';
import { createLogger, flushLogger } from '../src/observability/logger';
import { createMetrics } from '../src/observability/metrics';
import { requestObserver } from '../src/observability/request-log';
import { bareForwarding, listenOnBarePort } from './lib/bare-forwarding';

const target = process.env.BARE_TARGET;
const token = process.env.BARE_TOKEN;
const apiKey = process.env.STACK_API_KEY;
const logFile = process.env.STACK_LOG_FILE;
if (!target || !token || !apiKey || !logFile) {
  process.stderr.write('stack-proxy: set BARE_TARGET, BARE_TOKEN, STACK_API_KEY and STACK_LOG_FILE\n');
  process.exit(1);
}

const logger = createLogger({ level: 'info', file: logFile });
const metrics = createMetrics();
const observe = requestObserver(logger, metrics);

/** The request line and latency observation, as the gateway takes them (labelled like a plan read). */
const logAndCount: RequestHandler = (req, res, next) => {
  observe(req, res);
  res.locals.route = 'plan';
  next();
};

/** The one caller, made once. */
const CALLER: Caller = { id: 'bench', scopes: new Set(), via: 'api-key', origins: [] };

/** The cheapest caller check there is (the gateway hashes a key once per connection and remembers it). */
const requireKey: RequestHandler = (req, res, next) => {
  if (req.headers['x-api-key'] !== apiKey) {
    res.status(401).end();
    return;
  }
  req.caller = CALLER;
  next();
};

const app = express();
app.disable('x-powered-by'); // as the gateway (the bare proxy keeps Express's default)
app.set('etag', false);
app.set('query parser', false);
app.use(logAndCount);
app.use(securityHeaders());
app.use(requireKey);
app.use(
  rateLimit({
    windowMs: 60_000,
    limit: 1_000_000_000,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator: (req) => req.caller?.id ?? 'anonymous',
    validate: { singleCount: false },
  }),
);
app.use(bareForwarding(target, token));

/** How many latencies the histogram holds: printed at exit, so a test can see they were observed. */
async function observedRequests(): Promise<number> {
  const { values } = await metrics.httpDuration.get();
  return values
    .filter((value) => value.metricName === 'http_request_duration_seconds_count')
    .reduce((sum, value) => sum + value.value, 0);
}

listenOnBarePort(app, 'stack-proxy', async () => {
  process.stdout.write(`stack-proxy observed ${await observedRequests()} request latencies\n`);
  await flushLogger(logger);
});
