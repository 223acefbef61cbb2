// `npm run bench:features`: what each per-request feature of the gateway costs, measured apart with tinybench on
// the gateway's own modules (no sockets, no other process). It explains the CPU column of `npm run bench`: the
// gateway's CPU per request minus the bare proxy's is roughly the sum of these, plus Express layers and promises.
//
//   npm run bench:features        BENCH_FEATURE_MS (1000): measuring time per feature
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Socket } from 'node:net';
import { join } from 'node:path';
import express, { type Request, type RequestHandler, type Response } from 'express';
import { Bench } from 'tinybench';
import { accountMetrics } from '../src/accounts/account-metrics';
import { chooseAccount } from '../src/accounts/choose-account';
import { createMemoryBudgetStore, createProviderBudget } from '../src/budget';
import { authenticate } from '../src/callers/authenticate';
import type { Caller } from '../src/callers/caller';
import { loadClientRegistry } from '../src/callers/client-registry';
import { rateLimit } from '../src/callers/rate-limit';
import { loadCatalogue } from '../src/catalogue';
import { jsonBody } from '../src/http/json-body';
import { securityHeaders } from '../src/http/security-headers';
import { createDocumentReference } from '../src/observability/document-reference';
import { createLogger, flushLogger } from '../src/observability/logger';
import { createMetrics } from '../src/observability/metrics';
import { requestObserver } from '../src/observability/request-log';
import { startTracing } from '../src/observability/start-tracing';
import { NO_TRACING, type Tracing } from '../src/observability/tracing';
import { systemClock } from '../src/tokens';
import { createUsage } from '../src/usage';
import { tempDir } from '../test/support/temp-dir';
import { DOCUMENT_BODY, envNumber, writeLoadClient } from './lib/fixtures';

/** Each task runs its feature this many times, so the timer's resolution does not matter. */
const BATCH = 100;

const socket = new Socket();
/** No limit of its own: the rate limiter applies its default (1e9 a minute), so no request is ever refused. */
const CALLER: Caller = { id: 'bench', scopes: new Set(['documents:validate']), via: 'api-key', origins: [] };
function exchange(connection: Socket = socket): { req: Request; res: Response } {
  const req = new IncomingMessage(connection) as Request;
  req.method = 'POST';
  req.headers = { 'content-type': 'application/json' };
  req.id = 'bd7413ee-e956-49da-b1d8-baf7a9405e80';
  req.caller = CALLER;
  const res = new ServerResponse(req) as unknown as Response;
  res.locals = {};
  return { req, res };
}

/** A request whose body is already in its stream, as Node delivers a small POST. */
function withBody(headers: Record<string, string>): { req: Request; res: Response } {
  const pair = exchange();
  pair.req.headers = headers;
  pair.req.is = express.request.is; // Express's req.is (type-is), as the app's requests have it
  pair.req.push(Buffer.from(DOCUMENT_BODY));
  pair.req.push(null);
  return pair;
}

/** Runs a middleware to its `next()` (which express-rate-limit calls after a promise). */
function through(handler: RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise((resolve, reject) =>
    handler(req, res, (error?: unknown) => (error ? reject(error) : resolve())),
  );
}

/** An OTLP endpoint that reads each export and answers 200, on loopback: the exporter's full cost, no collector's. */
async function startOtlpSink(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The tracing hooks of one forwarded request: server span, authentication, token (from memory), upstream call. */
function tracedRequests(tracing: Tracing): () => Promise<void> {
  const authenticated = tracing.around('authenticate', (_req, _res, next) => next());
  const token = () => Promise.resolve({ source: 'memory' as const });
  const upstream = () => Promise.resolve({ status: 200 });
  const sourceOf = (t: { source: string }) => ({ 'gateway.token.source': t.source });
  const statusOf = (a: { status: number }) => ({ 'http.response.status_code': a.status });
  const operation = { 'http.request.method': 'POST', 'gateway.route': 'validation' };
  return async () => {
    for (let i = 0; i < BATCH; i++) {
      const { req, res } = exchange();
      await new Promise<void>((resolve) =>
        tracing.serve(req, res, () =>
          authenticated(req, res, () => {
            tracing
              .inSpan('token', token, sourceOf)
              .then(() => tracing.inSpan('upstream', upstream, statusOf, operation, 'client'))
              .then(() => {
                res.emit('close');
                resolve();
              });
          }),
        ),
      );
    }
  };
}

/** What governing the provider accounts adds to a request (issues 28-30), each part apart. */
function governanceTasks(bench: Bench, logger: ReturnType<typeof createLogger>): () => Promise<void> {
  const metrics = createMetrics();
  const account = { id: 'primary', hold: () => () => {} };
  const choose = chooseAccount({
    get: (id) => (id === 'primary' ? (account as never) : undefined),
    soleId: () => undefined,
  });
  const governed: Caller = { ...CALLER, accounts: ['primary', 'secondary'] };
  const view = accountMetrics(metrics, 'primary').metrics;
  const usage = createUsage({
    keyPrefix: 'features:',
    settings: { retentionDays: 400 },
    limitsOf: () => ({ day: 1_000_000_000, timeZone: 'America/Sao_Paulo' }),
    logger,
  });
  const budget = createProviderBudget({
    accountId: 'primary',
    settings: {
      requestsPerSecond: 1_000_000,
      burst: 100_000,
      shares: { sheddable: 0.5, standard: 0.8, critical: 1 },
    },
    waitMs: 250,
    retryAfterMaxSeconds: 120,
    probeLeaseMs: 11_000,
    store: createMemoryBudgetStore(),
    clock: systemClock,
    logger,
    metrics: metrics.budget,
  });
  const labels = { route: 'plan', status: '200' };
  bench
    .add('account choice (no X-Upstream-Account): lookup, hold until close, header', async () => {
      for (let i = 0; i < BATCH; i++) {
        const { req, res } = exchange();
        req.caller = governed;
        await through(choose, req, res);
        res.emit('close');
      }
    })
    .add('upstream latency observation, the metric itself (route, status)', () => {
      for (let i = 0; i < BATCH; i++) {
        exchange();
        metrics.upstreamDuration.observe({ ...labels, account: 'primary' }, 0.001);
      }
    })
    .add("upstream latency observation through the account's metrics view", () => {
      for (let i = 0; i < BATCH; i++) {
        exchange();
        view.upstreamDuration.observe(labels, 0.001);
      }
    })
    .add('quota: reserve + commit (day quota, leased; memory counters)', async () => {
      for (let i = 0; i < BATCH; i++) {
        exchange();
        const pending = usage.quotas.reserve('bench', 'primary');
        const decision = pending instanceof Promise ? await pending : pending;
        if (decision.allowed) decision.reservation.commit();
      }
    })
    .add('usage ledger: one request recorded (answer class + billable)', () => {
      for (let i = 0; i < BATCH; i++) {
        exchange();
        usage.ledger.record('bench', 'primary', 'plan', 'answers2xx');
        usage.ledger.record('bench', 'primary', 'plan', 'billable');
      }
    })
    .add('provider budget: admit + observe (a budget that does not bind)', async () => {
      for (let i = 0; i < BATCH; i++) {
        exchange();
        const admission = budget.admit('standard');
        if (admission instanceof Promise) await admission;
        budget.observe(200);
      }
    });
  return async () => {
    await budget.close();
    await usage.close();
  };
}

async function main(): Promise<void> {
  const dir = tempDir('bff-features-');
  const logger = createLogger({ level: 'info', file: join(dir, 'gateway.log') });
  const metrics = createMetrics();
  const observe = requestObserver(logger, metrics);
  const headers = securityHeaders();
  const { apiKey, clientsFile } = writeLoadClient('bench');
  const registry = loadClientRegistry(clientsFile, { logger, watch: false });
  const authenticateKey = authenticate({ registry });
  const withApiKey = (connection: Socket) => {
    const pair = exchange(connection);
    pair.req.headers = { 'x-api-key': apiKey };
    return pair;
  };
  const limiter = rateLimit({
    keyPrefix: 'features:',
    defaultLimit: { limit: 1_000_000_000, windowSeconds: 60 },
    metrics,
    logger,
  });
  const body = JSON.parse(DOCUMENT_BODY) as unknown;
  const catalogue = loadCatalogue(join(process.cwd(), 'config/operations.json'), { maxTimeoutMs: 10_000 });
  const validation = catalogue.operations.find((operation) => operation.id === 'validation')?.request;
  if (!validation) throw new Error('bench: the shipped catalogue has no validation operation');
  const readBody = jsonBody(64 * 1024);
  const plainJson = { 'content-type': 'application/json', 'content-length': String(DOCUMENT_BODY.length) };
  // What jsonBody falls back to, run on the same plain request: Express's req.is (type-is), then body-parser.
  const bodyParser = express.json({ limit: 64 * 1024, strict: true, type: () => true });

  const documentReference = createDocumentReference(undefined);
  const sink = await startOtlpSink();
  const tracing = startTracing(
    {
      tracesUrl: sink.url,
      serviceName: 'bench',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
      exportDelayMs: 200,
      propagateUpstream: false,
    },
    'bench',
    logger,
  );
  const bench = new Bench({ time: envNumber('BENCH_FEATURE_MS', 1000), warmupTime: 200 });
  bench
    .add('baseline: a request and response object pair', () => {
      for (let i = 0; i < BATCH; i++) exchange();
    })
    .add('request log line (info, LOG_FILE) + 1 latency observation', () => {
      for (let i = 0; i < BATCH; i++) {
        const { req, res } = exchange();
        res.locals.route = 'validation';
        res.locals.document = { country: 'ARG', type: 'CUIT', ref: documentReference('20-17254359-7') };
        observe(req, res);
        res.emit('close');
      }
    })
    .add('rate limit (express-rate-limit, RateLimit headers; memory store)', async () => {
      for (let i = 0; i < BATCH; i++) {
        const { req, res } = exchange();
        await through(limiter, req, res);
      }
    })
    .add('security headers (helmet, JSON-API profile)', async () => {
      for (let i = 0; i < BATCH; i++) {
        const { req, res } = exchange();
        await through(headers, req, res);
      }
    })
    .add('API key, first request of a connection (SHA-256, constant-time compare)', async () => {
      for (let i = 0; i < BATCH; i++) {
        const { req, res } = withApiKey({} as Socket); // a connection that presented no key yet
        await through(authenticateKey, req, res);
      }
    })
    .add('API key, again on the same keep-alive connection (remembered)', async () => {
      for (let i = 0; i < BATCH; i++) {
        const { req, res } = withApiKey(socket);
        await through(authenticateKey, req, res);
      }
    })
    .add('JSON body, read directly (plain JSON with a Content-Length)', async () => {
      for (let i = 0; i < BATCH; i++) {
        const { req, res } = withBody(plainJson);
        await through(readBody, req, res);
      }
    })
    .add('JSON body, through type-is + body-parser (the same request)', async () => {
      for (let i = 0; i < BATCH; i++) {
        const { req, res } = withBody(plainJson);
        if (!req.is('application/json')) throw new Error('not JSON');
        await through(bodyParser, req, res);
      }
    })
    .add('document validation + re-serialization (catalogue, ajv)', () => {
      for (let i = 0; i < BATCH; i++) {
        exchange();
        // A fresh copy each time: validation strips the body it is given in place.
        const valid = validation.validate({}, undefined, structuredClone(body));
        Buffer.from(JSON.stringify(valid.body));
      }
    })
    .add(
      'tracing off (no OTLP endpoint): the hooks of a request, its promises included',
      tracedRequests(NO_TRACING),
    )
    .add('tracing on: 4 spans a request, OTLP/HTTP export to a loopback sink', tracedRequests(tracing));
  const closeGovernance = governanceTasks(bench, logger);
  await bench.run();
  await closeGovernance();

  const perRequestUs = (name: string) => {
    const result = bench.getTask(name)?.result;
    if (!result || !('latency' in result)) throw new Error(`bench: "${name}" did not complete`);
    return (result.latency.mean * 1000) / BATCH;
  };
  const [baseline, ...features] = bench.tasks.map((task) => task.name);
  const baselineUs = perRequestUs(baseline as string);
  process.stdout.write(`Node ${process.version}; µs per request, the baseline object pair subtracted\n\n`);
  process.stdout.write(`| feature | µs/request |\n| :-- | --: |\n`);
  process.stdout.write(`| ${baseline} | ${baselineUs.toFixed(2)} (not subtracted from itself) |\n`);
  for (const name of features)
    process.stdout.write(`| ${name} | ${(perRequestUs(name) - baselineUs).toFixed(2)} |\n`);
  registry.close();
  await tracing.shutdown();
  await sink.close();
  await flushLogger(logger);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:features failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
