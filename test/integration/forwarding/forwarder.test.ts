// The forwarder leaves the caller's request as it came: after a forwarded call (HEAD, GET, POST, a call retried after
// a 401, a failed call) its method, URL and headers are the caller's own, for the logs, the metrics, the error
// handler and a retry, while the upstream (the simulator, a real HTTP server) saw the route's own.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Account } from '../../../src/accounts/account';
import { buildAccounts } from '../../../src/assembly/accounts';
import { createLifecycle, type Lifecycle } from '../../../src/assembly/lifecycle';
import { buildObservability } from '../../../src/assembly/observability';
import { buildRedis } from '../../../src/assembly/redis';
import { buildSharedTokens } from '../../../src/assembly/tokens';
import { resolveUpstream } from '../../../src/assembly/upstream';
import { loadConfig } from '../../../src/config/load-config';
import { type Forwarder, sendAnswer } from '../../../src/forwarding';
import type { UpstreamExchange } from '../../../src/forwarding/internal/forwarder';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';

const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const PASSWORD = 'forwarder-upstream-password';
const CALLER_HEADERS = {
  'x-api-key': 'caller-key-never-forwarded',
  authorization: 'Bearer caller-sso-token',
  'x-caller-marker': 'kept',
};

interface Seen {
  readonly method?: string;
  readonly url: string;
  readonly headers: Record<string, unknown>;
}

/** What the caller's request looked like before and after the forward, and whether its headers object survived. */
interface Observed {
  readonly before: Seen;
  readonly after: Seen;
  readonly sameHeadersObject: boolean;
}

const seenOf = (req: Request): Seen => ({ method: req.method, url: req.url, headers: { ...req.headers } });

let simulator: RunningSimulator;
let life: Lifecycle;
let server: Server;
let base: string;
let observed: Observed[] = [];

/** A route that forwards `exchange` and records the caller's request around it, answer or error. */
function forwarding(forwarder: Forwarder, exchange: (req: Request) => UpstreamExchange) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const headers = req.headers;
    const before = seenOf(req);
    const record = () =>
      observed.push({ before, after: seenOf(req), sameHeadersObject: req.headers === headers });
    try {
      const answer = await forwarder.forward(req, res, exchange(req));
      record();
      sendAnswer(res, answer);
    } catch (error) {
      record();
      // What the forwarder told the idempotency layer (SPEC §13): the call may have reached the provider, unanswered.
      res.setHeader('x-upstream-unknown', String(res.locals.upstreamUnknown === true));
      next(error);
    }
  };
}

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: 'forwarder-merchant', password: PASSWORD });
  const config = loadConfig({
    HOST: '127.0.0.1',
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'forwarder-merchant',
    UPSTREAM_PASSWORD: PASSWORD,
    ALLOW_MEMORY_STORE: 'true',
    PLAN_CACHE_TTL_SECONDS: '0',
  });
  const quiet = new Writable({ write: (_chunk, _encoding, done) => done() });
  const observability = buildObservability(config, 'test', quiet);
  life = createLifecycle();
  const upstream = await life.use(resolveUpstream(config, undefined, observability));
  const redis = await life.use(buildRedis(config, observability));
  const shared = await life.use(buildSharedTokens(config, redis, observability));
  const accounts = await life.use(
    buildAccounts(config, upstream.source, redis, shared, observability, undefined, {
      operationIds: () => ['plan', 'validation'],
    }),
  );
  const { forwarder } = accounts.get('default') as Account;
  const app = express();
  app.use((req, _res, next) => {
    req.id = 'forwarder-test-request';
    next();
  });
  app.all(
    '/caller/plan',
    forwarding(forwarder, () => ({
      route: 'plan',
      method: 'GET',
      path: `/api/subscriptions/plan/${PLAN_ID}`,
    })),
  );
  app.post(
    '/caller/validation',
    express.json(),
    forwarding(forwarder, (req) => ({
      route: 'validation',
      method: 'POST',
      path: '/api/validation/document',
      body: Buffer.from(JSON.stringify(req.body)),
    })),
  );
  app.post(
    '/caller/validation-keyed',
    express.json(),
    forwarding(forwarder, (req) => ({
      route: 'validation',
      method: 'POST',
      path: '/api/validation/document',
      body: Buffer.from(JSON.stringify(req.body)),
      idempotencyKey: 'caller-key-123',
    })),
  );
  app.use((_error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    res.status(502).end();
  });
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await life?.closeAll();
  await simulator?.close();
});

beforeEach(() => {
  observed = [];
  simulator.reset();
});

/** The one forward's observation: the caller's request unchanged, its headers the very object it came with. */
function callerRequestUnchanged(method: string, path: string): void {
  expect(observed).toHaveLength(1);
  const [{ before, after, sameHeadersObject }] = observed as [Observed];
  expect(before.method).toBe(method);
  expect(before.url).toBe(path);
  expect(before.headers).toMatchObject(CALLER_HEADERS);
  expect(after).toEqual(before);
  expect(sameHeadersObject).toBe(true);
}

describe("the caller's request after a forwarded call", () => {
  test('a HEAD stays a HEAD for the caller; the upstream is sent the route’s GET', async () => {
    const res = await fetch(`${base}/caller/plan?view=full`, { method: 'HEAD', headers: CALLER_HEADERS });
    expect(res.status).toBe(200);
    callerRequestUnchanged('HEAD', '/caller/plan?view=full');
    const sent = simulator.receivedRequests();
    expect(sent.map((r) => [r.method, r.path])).toEqual([['GET', `/api/subscriptions/plan/${PLAN_ID}`]]);
    expect(sent[0]?.headers['x-caller-marker']).toBeUndefined();
  });

  test('a GET keeps its URL and headers; the upstream is sent the route’s path and only the upstream headers', async () => {
    const res = await fetch(`${base}/caller/plan`, { headers: CALLER_HEADERS });
    expect(res.status).toBe(200);
    callerRequestUnchanged('GET', '/caller/plan');
    const [sent] = simulator.receivedRequests();
    expect(sent?.path).toBe(`/api/subscriptions/plan/${PLAN_ID}`);
    expect(sent?.headers['x-request-id']).toBe('forwarder-test-request');
    expect(sent?.headers.authorization).toMatch(/^Bearer eyJ/);
    expect(sent?.headers['x-api-key']).toBeUndefined();
  });

  test('a POST keeps its method, URL and content headers; the upstream is sent the serialized body', async () => {
    const body = { country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } };
    const res = await fetch(`${base}/caller/validation`, {
      method: 'POST',
      headers: { ...CALLER_HEADERS, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    callerRequestUnchanged('POST', '/caller/validation');
    expect(observed[0]?.after.headers['content-type']).toBe('application/json');
    const [sent] = simulator.receivedRequests();
    expect([sent?.method, sent?.path]).toEqual(['POST', '/api/validation/document']);
    expect(sent?.headers['content-length']).toBe(String(JSON.stringify(body).length));
  });

  test('a call retried after a 401 leaves the caller’s request as it came, through both attempts', async () => {
    await fetch(`${base}/caller/plan`, { headers: CALLER_HEADERS });
    observed = [];
    simulator.reset();
    simulator.revokeTokens();
    const res = await fetch(`${base}/caller/plan`, { method: 'HEAD', headers: CALLER_HEADERS });
    expect(res.status).toBe(200);
    expect(simulator.stats().unauthorized).toBe(1);
    expect(simulator.stats().planReads).toBe(1);
    callerRequestUnchanged('HEAD', '/caller/plan');
  });

  test('a failed call hands the error handler the caller’s own request', async () => {
    simulator.setFaults({ errorRate: 1, errorStatus: 500, maxFailures: 1 });
    const res = await fetch(`${base}/caller/plan`, { headers: CALLER_HEADERS });
    expect(res.status).toBe(502);
    callerRequestUnchanged('GET', '/caller/plan');
  });
});

describe('what the forwarder tells an Idempotency-Key', () => {
  const post = (path: string) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { ...CALLER_HEADERS, 'idempotency-key': 'caller-key-123', 'content-type': 'application/json' },
      body: JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } }),
    });

  test("the caller's Idempotency-Key never travels upstream; an exchange's key (forwardIdempotencyKey) does", async () => {
    expect((await post('/caller/validation')).status).toBe(200);
    expect((await post('/caller/validation-keyed')).status).toBe(200);
    const [plain, keyed] = simulator.receivedRequests();
    expect(plain?.headers['idempotency-key']).toBeUndefined();
    expect(keyed?.headers['idempotency-key']).toBe('caller-key-123');
  });

  test('a connection cut after the request was sent: the outcome is unknown', async () => {
    simulator.setFaults({ resetConnections: true });
    const res = await post('/caller/validation');
    expect(res.status).toBe(502);
    expect(res.headers.get('x-upstream-unknown')).toBe('true');
    expect(simulator.receivedRequests()).toHaveLength(1);
  });

  test('a provider 5xx is an answer, not an unknown outcome', async () => {
    simulator.setFaults({ errorRate: 1, errorStatus: 503, maxFailures: 1 });
    const res = await post('/caller/validation');
    expect(res.status).toBe(502);
    expect(res.headers.get('x-upstream-unknown')).toBe('false');
  });
});
