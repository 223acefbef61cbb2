// Headers on every answer, added as the head is written: every way an answer goes out carries them, a route's own
// value wins, and a request still waiting holds none of them.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Express } from 'express';
import request from 'supertest';
import { type FixedHeader, headersOnEveryAnswer } from '../../../src/http/answer-head';
import { expressMessageClasses } from '../../../src/http/express-messages';

const FIXED: FixedHeader[] = [
  ['x-frame-options', 'DENY'],
  ['cache-control', 'no-store'],
];

function appWithRoutes(seen: { namesWhileWaiting?: string[] }): Express {
  const app = express();
  app.disable('x-powered-by'); // as the gateway
  headersOnEveryAnswer(app, FIXED);
  app.get('/json', (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/own', (_req, res) => {
    res.setHeader('cache-control', 'max-age=60');
    res.json({ ok: true });
  });
  app.get('/write-head', (_req, res) => {
    res.writeHead(201, { 'cache-control': 'private', 'content-type': 'text/plain' }).end('made');
  });
  app.get('/write-head-reason', (_req, res) => {
    res.writeHead(202, 'Taken', { 'content-type': 'text/plain' }).end('later');
  });
  app.get('/raw-end', (_req, res) => {
    res.statusCode = 204;
    res.end();
  });
  app.get('/stream', (_req, res) => {
    res.write('a');
    res.end('b');
  });
  app.get('/flush', (_req, res) => {
    res.flushHeaders();
    res.end();
  });
  app.get('/waiting', (_req, res) => {
    seen.namesWhileWaiting = res.getHeaderNames();
    setTimeout(() => res.json({ waited: true }), 20);
  });
  app.get('/twice', (_req, res) => {
    res.writeHead(200).end();
    try {
      res.writeHead(500);
    } catch (error) {
      seen.namesWhileWaiting = [(error as NodeJS.ErrnoException).code ?? 'no code'];
    }
  });
  app.get('/fails', () => {
    throw new Error('boom');
  });
  return app;
}

describe('headers on every answer, added as the head is written', () => {
  const seen: { namesWhileWaiting?: string[] } = {};
  const app = appWithRoutes(seen);

  test.each([
    ['/json', 200],
    ['/raw-end', 204],
    ['/stream', 200],
    ['/flush', 200],
    ['/fails', 500],
    ['/no-such-route', 404],
  ])('%s (%i) carries them', async (path, status) => {
    const res = await request(app).get(path).expect(status);
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['cache-control']).toBe('no-store');
  });

  test("a route's own value wins, set before or given to writeHead; the others are still added", async () => {
    const own = await request(app).get('/own').expect(200);
    expect(own.headers['cache-control']).toBe('max-age=60');
    expect(own.headers['x-frame-options']).toBe('DENY');
    const given = await request(app).get('/write-head').expect(201);
    expect(given.headers['cache-control']).toBe('private');
    expect(given.headers['x-frame-options']).toBe('DENY');
    expect(given.text).toBe('made');
  });

  test('writeHead with a reason phrase keeps it, and the headers', async () => {
    const res = await request(app).get('/write-head-reason').expect(202);
    expect((res as unknown as { res: { statusMessage: string } }).res.statusMessage).toBe('Taken');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.text).toBe('later');
  });

  test('a request still waiting holds none of them in its header map', async () => {
    const res = await request(app).get('/waiting').expect(200);
    expect(seen.namesWhileWaiting).toEqual([]);
    expect(res.headers['cache-control']).toBe('no-store');
  });

  test('a second writeHead still fails as Node fails it', async () => {
    await request(app).get('/twice').expect(200);
    expect(seen.namesWhileWaiting).toEqual(['ERR_HTTP_HEADERS_SENT']);
  });

  test("on the gateway's server classes (expressMessageClasses after it), answers carry them too", async () => {
    const gatewayLike = appWithRoutes({});
    const server: Server = createServer(expressMessageClasses(gatewayLike), gatewayLike);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/json`);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('cache-control')).toBe('no-store');
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
