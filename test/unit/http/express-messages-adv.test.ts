// Adversarial review of expressMessageClasses (commit 4e42cdd): paths checked and found to behave as without the
// classes, then the defects the review found in that first version (mounting, repeated calls), fixed since, and the
// one rule the caller keeps (call before sub-apps are mounted).
import { writeFileSync } from 'node:fs';
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import request from 'supertest';
import { expressMessageClasses } from '../../../src/http/express-messages';
import { answerProtocolErrors } from '../../../src/http/protocol-errors';
import { rememberClientIp } from '../../../src/http/request-context';
import { rawExchange, serversClosedAfterEach } from '../../support/raw-http';
import { tempDir } from '../../support/temp-dir';

const QUIET = { info: () => undefined };
const servers = serversClosedAfterEach();

/** A server for `app` as src/server.ts makes it (classes, protocol-error answers), or a plain one. */
async function serve(
  app: Express | RequestListener,
  withClasses = true,
): Promise<{ server: Server; port: number }> {
  const server = withClasses
    ? createServer({ connectionsCheckingInterval: 1_000, ...expressMessageClasses(app as Express) }, app)
    : createServer({ connectionsCheckingInterval: 1_000 }, app);
  answerProtocolErrors(server, QUIET, { localMode: false });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/** A raw answer without the lines that change per run. */
function stable(raw: string): string {
  return raw
    .replace(/^date: .*\r\n/gim, '')
    .replace(/^x-request-id: .*\r\n/gim, '')
    .replace(/"requestId":"[^"]*"/g, '');
}

function gatewayLikeApp(): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  rememberClientIp(app);
  return app;
}

describe('expressMessageClasses, paths before Express runs (Node internals)', () => {
  it('checkExpectation (src/http/protocol-errors.ts) gets a class-built response and answers its 417 envelope', async () => {
    const app = gatewayLikeApp();
    let seen: unknown;
    const { server, port } = await serve(app);
    server.prependListener('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
      seen = Object.getPrototypeOf(res) === app.response;
    });
    const raw = await rawExchange(port, [
      'GET /x HTTP/1.1\r\nHost: a\r\nExpect: bogus\r\nX-Request-Id: abc-1\r\n\r\n',
    ]);
    expect(seen).toBe(true);
    expect(raw).toMatch(/^HTTP\/1\.1 417 Expectation Failed\r\n/);
    expect(raw).toContain('x-request-id: abc-1');
    expect(raw).toContain('"EXPECTATION_FAILED"');
  });

  it('Expect: 100-continue: 100 first, then the route reads the body', async () => {
    const app = gatewayLikeApp();
    app.post('/echo', express.json(), (req, res) => {
      res.json({ got: req.body, onApp: Object.getPrototypeOf(req) === app.request });
    });
    const { port } = await serve(app);
    const body = '{"a":1}';
    const raw = await rawExchange(port, [
      `POST /echo HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
      body,
    ]);
    expect(raw).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK/);
    expect(raw).toContain('{"got":{"a":1},"onApp":true}');
  });

  it('HEAD: headers of the GET, no body', async () => {
    const app = gatewayLikeApp();
    app.get('/thing', (_req, res) => {
      res.json({ a: 'x'.repeat(20) });
    });
    const { port } = await serve(app);
    const raw = await rawExchange(port, ['HEAD /thing HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n']);
    expect(raw).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(raw).toMatch(/content-length: 28\r\n/i);
    expect(raw.endsWith('\r\n\r\n')).toBe(true);
  });

  it('pipelined keep-alive requests: each is its own object, req.ip (remembered per object) never leaks', async () => {
    const app = gatewayLikeApp();
    const objects = new Set<unknown>();
    app.get('/ip', (req, res) => {
      objects.add(req);
      res.json({ ip: req.ip, onApp: Object.getPrototypeOf(req) === app.request });
    });
    const { port } = await serve(app);
    const one = (ip: string, last = false) =>
      `GET /ip HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: ${ip}\r\n${last ? 'Connection: close\r\n' : ''}\r\n`;
    const raw = await rawExchange(port, [
      one('203.0.113.1') + one('203.0.113.2:4444') + one('[2001:db8::3]:1', true),
    ]);
    expect(raw.match(/\{"ip":"[^"]*","onApp":true\}/g)).toEqual([
      '{"ip":"203.0.113.1","onApp":true}',
      '{"ip":"203.0.113.2","onApp":true}',
      '{"ip":"2001:db8::3","onApp":true}',
    ]);
    expect(objects.size).toBe(3);
  });

  it('unreadable request behind one in flight (pipelining in protocol-errors.ts): the first answer, then close', async () => {
    const answers: string[] = [];
    for (const withClasses of [true, false]) {
      const app = gatewayLikeApp();
      app.get('/slow', (_req, res) => {
        setTimeout(() => res.json({ slow: true }), 50);
      });
      const { port } = await serve(app, withClasses);
      answers.push(
        stable(await rawExchange(port, ['GET /slow HTTP/1.1\r\nHost: a\r\n\r\n', 'NOT HTTP AT ALL\r\n\r\n'])),
      );
    }
    expect(answers[0]).toContain('{"slow":true}');
    expect(answers[0]).toBe(answers[1]);
  });

  it('Upgrade without an upgrade listener, CONNECT, a missing Host, a header overflow: as without the classes', async () => {
    const cases = [
      'GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
      'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
      'GET /ws HTTP/1.1\r\nConnection: close\r\n\r\n',
      `GET /ws HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    ];
    const answers: string[][] = [];
    for (const withClasses of [true, false]) {
      const app = gatewayLikeApp();
      app.get('/ws', (_req, res) => {
        res.set('connection', 'close').json({ plain: true });
      });
      const { port } = await serve(app, withClasses);
      const these: string[] = [];
      for (const raw of cases) these.push(stable(await rawExchange(port, [raw], 150)));
      answers.push(these);
    }
    expect(answers[0]?.[0]).toContain('{"plain":true}');
    expect(answers[0]).toEqual(answers[1]);
  });
});

describe('expressMessageClasses, Express features on class-built messages', () => {
  it('sendFile, static, redirect, cookie, format, protocol/hostname behind a trusted proxy, an answer after early hints and flushHeaders', async () => {
    const dir = tempDir('express-messages-adv-');
    writeFileSync(join(dir, 'a.txt'), 'file body');
    const app = gatewayLikeApp();
    app.use('/static', express.static(dir));
    app.get('/file', (_req, res) => res.sendFile(join(dir, 'a.txt')));
    app.get('/go', (_req, res) => res.redirect(303, '/there'));
    app.get('/cookie', (_req, res) => res.cookie('k', 'v', { httpOnly: true }).send('ok'));
    app.get('/fmt', (_req, res) =>
      res.format({ 'text/plain': () => res.send('text'), 'application/json': () => res.json({ j: 1 }) }),
    );
    app.get('/who', (req, res) =>
      res.json({ protocol: req.protocol, hostname: req.hostname, secure: req.secure }),
    );
    app.get('/hints', (_req, res) => {
      res.writeEarlyHints({ link: '</a.css>; rel=preload; as=style' });
      res.flushHeaders();
      res.end('late');
    });
    const { server } = await serve(app);
    expect((await request(server).get('/static/a.txt')).text).toBe('file body');
    expect((await request(server).get('/file')).text).toBe('file body');
    expect((await request(server).get('/go')).headers.location).toBe('/there');
    expect((await request(server).get('/cookie')).headers['set-cookie']).toEqual(['k=v; Path=/; HttpOnly']);
    expect((await request(server).get('/fmt').set('accept', 'application/json')).body).toEqual({ j: 1 });
    expect((await request(server).get('/fmt').set('accept', 'image/png')).status).toBe(406);
    const who = await request(server)
      .get('/who')
      .set('x-forwarded-proto', 'https')
      .set('x-forwarded-host', 'pay.example');
    expect(who.body).toEqual({ protocol: 'https', hostname: 'pay.example', secure: true });
    expect((await request(server).get('/hints')).text).toBe('late');
  });

  it('a sub-app mounted before the classes: its own prototypes inside, the class prototype again after it', async () => {
    const app = gatewayLikeApp();
    const sub = express();
    sub.get('/sub/in', (req, res, next) => {
      res.locals.inside = { app: req.app === sub, ip: req.ip };
      next();
    });
    app.use(sub);
    app.get('/sub/in', (req: Request, res: Response) => {
      res.json({
        ...res.locals.inside,
        after: Object.getPrototypeOf(req) === app.request && Object.getPrototypeOf(res) === app.response,
        appAfter: req.app === app,
      });
    });
    const { server } = await serve(app);
    const answer = await request(server).get('/sub/in').set('x-forwarded-for', '203.0.113.9:555');
    // ip without the port: the sub-app's request inherits the gateway's remembered-ip getter.
    expect(answer.body).toEqual({ app: true, ip: '203.0.113.9', after: true, appAfter: true });
  });

  it('an express.Router sub-router leaves the prototypes alone', async () => {
    const app = gatewayLikeApp();
    const router = express.Router();
    router.get('/r', (req, res) => res.json({ onApp: Object.getPrototypeOf(req) === app.request }));
    app.use('/mounted', router);
    const { server } = await serve(app);
    expect((await request(server).get('/mounted/r')).body).toEqual({ onApp: true });
  });

  it('http-proxy-middleware streams an upstream answer into a class-built response', async () => {
    const upstream = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('part1;');
      setTimeout(() => res.end('part2'), 20);
    });
    servers.push(upstream);
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const app = gatewayLikeApp();
    app.use(
      '/up',
      createProxyMiddleware({ target: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` }),
    );
    const { server } = await serve(app);
    const answer = await request(server).get('/up/anything');
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('part1;part2');
  });

  it('an error handler and finalhandler still answer (thrown in the first middleware)', async () => {
    const app = gatewayLikeApp();
    app.use(() => {
      throw new Error('boom');
    });
    app.use((err: Error, _req: Request, res: Response, _next: NextFunction) => {
      res.status(500).json({ failed: err.message });
    });
    const { server } = await serve(app);
    expect((await request(server).get('/')).body).toEqual({ failed: 'boom' });
  });
});

describe('expressMessageClasses, the app mounted, served twice, or with a sub-app', () => {
  // Express's 'mount' handler re-parents app.request (node_modules/express/lib/application.js:118-119), which is the
  // class prototype by then: chained under the app's own prototype (the first version), that cut the app's own
  // prototypes (holding `app` and rememberClientIp's `ip`) out of the chain; a stand-in holding their properties does not.
  it('the app mounted into another app after the classes keeps its own req.app, settings and ip getter', async () => {
    const app = gatewayLikeApp();
    app.set('json spaces', 0);
    app.get('/inner', (req, res) => {
      res.json({ sameApp: req.app === app, resApp: res.app === app, ip: req.ip });
    });
    const { server } = await serve(app); // classes made here, as startServers does
    const outer = express(); // e.g. a test or a dev wrapper serving the gateway under a prefix
    outer.set('json spaces', 2);
    outer.use(app);
    const outerServed = await serve(outer, false);
    const answer = await request(server).get('/inner').set('x-forwarded-for', '203.0.113.9:555');
    expect(answer.text).toBe('{"sameApp":true,"resApp":true,"ip":"203.0.113.9"}');
    // Through the outer app too: Express's mounted_app moves the messages onto the inner app's prototypes and back.
    const viaOuter = await request(outerServed.server)
      .get('/inner')
      .set('x-forwarded-for', '203.0.113.9:555');
    expect(viaOuter.text).toBe('{"sameApp":true,"resApp":true,"ip":"203.0.113.9"}');
  });

  // A second pair of classes on the same app would leave the first server's messages where Express no longer wants
  // them (the saving lost there, silently): the app keeps one pair.
  it('a second server on the same app keeps the first one built on app.request', async () => {
    const app = gatewayLikeApp();
    let builtOnApp: boolean | undefined;
    app.get('/x', (_req, res) => res.end());
    const first = await serve(app);
    first.server.prependListener('request', (req) => {
      builtOnApp = Object.getPrototypeOf(req) === app.request;
    });
    await serve(app);
    await request(first.server).get('/x');
    expect(builtOnApp).toBe(true);
  });

  it('repeated calls on one app return the same pair and do not lengthen the prototype chain', () => {
    const app = gatewayLikeApp();
    const depth = (proto: object | null) => {
      let n = 0;
      for (let p = proto; p !== null; p = Object.getPrototypeOf(p)) n++;
      return n;
    };
    const first = expressMessageClasses(app);
    const once = depth(app.request);
    for (let i = 0; i < 100; i++) expect(expressMessageClasses(app)).toBe(first);
    expect(depth(app.request)).toBe(once);
  });

  it('an app.request replaced since gets a new pair standing in for it, each class keeping its own constructor', () => {
    const app = gatewayLikeApp();
    const first = expressMessageClasses(app);
    class Replacement extends first.IncomingMessage {}
    Object.defineProperty(Replacement.prototype, 'marker', { value: 'replaced' });
    Object.assign(app, { request: Replacement.prototype });
    const second = expressMessageClasses(app);
    expect(second).not.toBe(first);
    expect(app.request).toBe(second.IncomingMessage.prototype);
    expect(app.response).toBe(second.ServerResponse.prototype);
    expect(second.IncomingMessage.prototype.constructor).toBe(second.IncomingMessage);
    expect((app.request as unknown as { marker?: string }).marker).toBe('replaced');
  });

  // A sub-app mounted before the call inherits from the app's original request prototype, not from the class one
  // that app.request is afterwards: what is defined on app.request after the call never reaches its routes. The
  // documented rule (express-messages.ts): call before mounting; the gateway mounts no sub-app.
  it('a sub-app mounted before the classes keeps the old prototype: a later definition does not reach it', async () => {
    const app = gatewayLikeApp();
    const sub = express();
    sub.get('/s', (req, res) => res.json({ late: (req as Request & { late?: string }).late ?? null }));
    app.use(sub);
    const { server } = await serve(app);
    Object.defineProperty(app.request, 'late', { configurable: true, get: () => 'seen' });
    expect((await request(server).get('/s')).body).toEqual({ late: null });
  });
});
