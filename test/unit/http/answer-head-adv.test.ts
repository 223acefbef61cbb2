// Adversarial review of headersOnEveryAnswer (commit 8f35047): the headers every answer carries, now added as the head
// is written instead of by a first middleware. Every test here passes: the review found no answer of the gateway that
// lost one of them or got another value. What differs from the old middleware only for code the gateway does not have
// (a route that removes or appends to one of them, res.sendFile, a read of res.getHeader before the head) is written
// in answer-head.ts's own comment.

import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import express, { type Express, type RequestHandler } from 'express';
import { fixedAnswerHeaders, headersOnEveryAnswer } from '../../../src/http/answer-head';
import { expressMessageClasses } from '../../../src/http/express-messages';
import { answerProtocolErrors } from '../../../src/http/protocol-errors';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { rawExchange, serversClosedAfterEach } from '../../support/raw-http';
import { catalogueWithStatement } from '../../support/statement-operation';
import { tempDir } from '../../support/temp-dir';

const LOCAL = fixedAnswerHeaders({ localMode: true });
const QUIET = { info: () => undefined };
const servers = serversClosedAfterEach();

/** The app's server as src/server.ts makes it: the classes made after createApp installed the override. */
async function serve(app: Express): Promise<number> {
  const server = createServer({ connectionsCheckingInterval: 1_000, ...expressMessageClasses(app) }, app);
  answerProtocolErrors(server, QUIET, { localMode: true });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** Each header line of one raw head, lower-cased names, as [name, value] pairs in order. */
function headLines(head: string): [string, string][] {
  return head
    .split('\r\n')
    .slice(1)
    .filter(Boolean)
    .map((line) => {
      const at = line.indexOf(':');
      return [line.slice(0, at).toLowerCase(), line.slice(at + 1).trim()];
    });
}

/** Every fixed header once, with its value, except those in `own` (the route's value, once). */
function expectFixed(lines: [string, string][], own: Record<string, string> = {}) {
  for (const [name, value] of LOCAL) {
    const found = lines.filter(([n]) => n === name).map(([, v]) => v);
    expect({ name, found }).toEqual({ name, found: [own[name] ?? value] });
  }
}

/** The old pipeline (before 8f35047): a first middleware that set them all. */
function oldFirstMiddleware(): RequestHandler {
  return (_req, res, next) => {
    for (const [name, value] of LOCAL) res.setHeader(name, value);
    next();
  };
}

/** The ways an answer goes out that the gateway and its libraries use, on one app. */
function routes(app: Express): Express {
  app.disable('x-powered-by');
  app.set('etag', false);
  app.get('/json', (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/redirect', (_req, res) => {
    res.redirect(303, '/elsewhere');
  });
  app.get('/page', (_req, res) => {
    res.setHeader('Content-Security-Policy', "default-src 'self'");
    res.type('html').send('<p>page</p>');
  });
  app.get('/raw-array', (_req, res) => {
    res.writeHead(200, ['Cache-Control', 'private', 'content-type', 'text/plain']).end('raw');
  });
  app.get('/object', (_req, res) => {
    res.writeHead(200, { 'X-Frame-Options': 'SAMEORIGIN' }).end('obj');
  });
  app.get('/flush', (_req, res) => {
    res.flushHeaders();
    setTimeout(() => res.end('late'), 10);
  });
  app.get('/hints', (_req, res) => {
    res.writeEarlyHints({ link: '</app.css>; rel=preload; as=style' });
    res.json({ hinted: true });
  });
  app.get('/chunks', (_req, res) => {
    res.status(206);
    res.write('a');
    res.end('b');
  });
  app.get('/no-content', (_req, res) => {
    res.status(204).end();
  });
  app.get('/status', (_req, res) => {
    res.sendStatus(202);
  });
  app.get('/fails', () => {
    throw new Error('boom');
  });
  return app;
}

describe('headersOnEveryAnswer, as the gateway installs it (before expressMessageClasses)', () => {
  const paths = [
    '/json',
    '/redirect',
    '/page',
    '/raw-array',
    '/object',
    '/flush',
    '/hints',
    '/chunks',
    '/no-content',
    '/status',
    '/fails',
    '/missing',
  ];

  test.each(paths)('GET and HEAD %s: the same head as the old first middleware', async (path) => {
    const before = express();
    before.use(oldFirstMiddleware());
    routes(before);
    const now = express();
    headersOnEveryAnswer(now, LOCAL);
    routes(now);
    const [beforePort, nowPort] = [await serve(before), await serve(now)];
    for (const method of ['GET', 'HEAD']) {
      const ask = `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`;
      const heads = await Promise.all(
        [beforePort, nowPort].map(async (port) =>
          headLines(
            (await rawExchange(port, ask))
              .split('\r\n\r\n')
              .filter((part) => part.startsWith('HTTP/1.1 ') && !part.startsWith('HTTP/1.1 103'))[0] ?? '',
          )
            // finalhandler's page holds a stack trace: its length is not the answer's head
            .filter(([name]) => name !== 'date' && name !== 'content-length')
            .sort(([a], [b]) => a.localeCompare(b)),
        ),
      );
      expect(heads[1]).toEqual(heads[0]);
      expect(heads[1].length).toBeGreaterThan(LOCAL.length);
    }
  });

  test("a route's raw array and header object win, every other fixed header is there once", async () => {
    const app = express();
    headersOnEveryAnswer(app, LOCAL);
    const port = await serve(routes(app));
    const raw = await rawExchange(port, 'GET /raw-array HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expectFixed(headLines(raw.split('\r\n\r\n')[0] as string), { 'cache-control': 'private' });
    const object = await rawExchange(port, 'GET /object HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expectFixed(headLines(object.split('\r\n\r\n')[0] as string), { 'x-frame-options': 'SAMEORIGIN' });
  });

  test('a 103 carries only its hints; the final answer after it carries them all', async () => {
    const app = express();
    headersOnEveryAnswer(app, LOCAL);
    const port = await serve(routes(app));
    const [early, final] = (
      await rawExchange(port, 'GET /hints HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    ).split('\r\n\r\n');
    expect(early).toMatch(/^HTTP\/1\.1 103 /);
    expect(headLines(early as string).map(([name]) => name)).toEqual(['link']);
    expectFixed(headLines(final as string));
  });

  test('a 304 from res.send (If-None-Match: *) and a sub-app or router mounted before or after the classes carry them', async () => {
    const app = express();
    headersOnEveryAnswer(app, LOCAL);
    const early = express();
    early.get('/early', (_req, res) => res.json({ sub: 'early' }));
    app.use(early); // mounted before expressMessageClasses replaces app.response
    const router = express.Router();
    router.get('/router', (_req, res) => res.json({ sub: 'router' }));
    app.use(router);
    routes(app);
    const port = await serve(app);
    const late = express();
    late.get('/late', (_req, res) => res.json({ sub: 'late' }));
    app.use(late); // mounted after
    for (const path of ['/early', '/router', '/late']) {
      const answer = await rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(answer).toMatch(/^HTTP\/1\.1 200 /);
      expectFixed(headLines(answer.split('\r\n\r\n')[0] as string));
    }
    const fresh = await rawExchange(
      port,
      'GET /json HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\nConnection: close\r\n\r\n',
    );
    expect(fresh).toMatch(/^HTTP\/1\.1 304 /);
    expectFixed(headLines(fresh.split('\r\n\r\n')[0] as string));
  });

  test("the 417 of answerProtocolErrors (a response on the app's class): each fixed header once", async () => {
    const app = express();
    headersOnEveryAnswer(app, LOCAL);
    const port = await serve(routes(app));
    const answer = await rawExchange(port, 'GET /json HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 417 /);
    // x-upstream is new on it (it never was before 8f35047): an addition, not a loss.
    expectFixed(headLines(answer.split('\r\n\r\n')[0] as string));
  });

  test('the raw answers of requests the parser refuses (400, 431) carry each fixed header once', async () => {
    const app = express();
    headersOnEveryAnswer(app, LOCAL);
    const port = await serve(routes(app));
    const refused = [
      ['GET /json HTTP/9.Z\r\n\r\n', 400],
      [`GET /json HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    ] as const;
    for (const [request, status] of refused) {
      const answer = await rawExchange(port, request);
      expect(answer.startsWith(`HTTP/1.1 ${status} `)).toBe(true);
      expectFixed(headLines(answer.split('\r\n\r\n')[0] as string));
    }
  });
});

describe('the real gateway in local mode: every kind of answer carries them', () => {
  const KEY = 'answer-head-adv-key-0123456789';
  const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
  let gw: TestGateway;
  let metricsUrl: string;

  beforeAll(async () => {
    const operations = join(tempDir('answer-head-adv-'), 'operations.json');
    writeFileSync(operations, catalogueWithStatement());
    const clients = writeClientsFile([
      {
        id: 'answer-head-adv',
        keys: [KEY],
        scopes: ['documents:validate', 'plans:read'],
        accounts: ['sandbox', 'production'],
        rateLimit: { limit: 1000, windowSeconds: 60 },
      },
    ]);
    gw = await startTestGateway({
      CLIENTS_FILE: clients,
      OPERATIONS_FILE: operations,
      METRICS_PORT: '0',
      LOG_LEVEL: 'silent',
    });
    metricsUrl = gw.gateway.metricsUrl ?? '';
  });
  afterAll(() => gw.close());

  test.each([
    ['GET', '/healthz', {}, 200, {}],
    ['HEAD', '/healthz', {}, 200, {}],
    ['GET', '/', {}, 200, { 'content-security-policy': expect.stringContaining("script-src 'self'") }],
    ['GET', '/bff/login?returnTo=%2F', {}, 303, {}],
    ['GET', '/bff/user', { 'x-csrf': '1' }, 401, {}],
    ['GET', '/missing', {}, 404, {}],
    ['POST', '/healthz', {}, 405, {}],
    ['GET', PLAN, { 'x-api-key': KEY }, 200, {}],
    ['HEAD', PLAN, { 'x-api-key': KEY }, 200, {}],
    ['GET', PLAN, {}, 401, {}],
    ['GET', '/api/subscriptions/sub_7Hq2Lm9X/statement?kib=64', { 'x-api-key': KEY }, 200, {}],
    ['HEAD', '/api/subscriptions/sub_7Hq2Lm9X/statement?kib=64', { 'x-api-key': KEY }, 200, {}],
  ] as const)('%s %s (%#)', async (method, path, headers, status, own) => {
    const res = await fetch(gw.url + path, { method, headers, redirect: 'manual' });
    await res.arrayBuffer();
    expect(res.status).toBe(status);
    for (const [name, value] of LOCAL)
      expect({ name, value: res.headers.get(name) }).toEqual({
        name,
        value: (own as Record<string, unknown>)[name] ?? value,
      });
  });

  test('a 304 (If-None-Match: *, which fetch would turn into a revalidation) carries them', async () => {
    const port = Number(new URL(gw.url).port);
    const answer = await rawExchange(
      port,
      'GET /healthz HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\nConnection: close\r\n\r\n',
    );
    expect(answer).toMatch(/^HTTP\/1\.1 304 /);
    expectFixed(headLines(answer.split('\r\n\r\n')[0] as string));
  });

  test('the metrics server of METRICS_PORT is as it was: no-store, no helmet, no marker', async () => {
    const res = await fetch(`${metricsUrl}/metrics`);
    await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-frame-options')).toBeNull();
    expect(res.headers.get('x-upstream')).toBeNull();
  });
});
