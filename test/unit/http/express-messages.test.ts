import { createServer, IncomingMessage, type Server, ServerResponse } from 'node:http';
import express, { type Express } from 'express';
import request from 'supertest';
import { expressMessageClasses } from '../../../src/http/express-messages';

interface Seen {
  builtOnApp?: boolean;
  handledOnApp?: boolean;
}

function appAndServer(withClasses: boolean): { app: Express; server: Server; seen: Seen } {
  const app = express();
  app.set('trust proxy', 'loopback');
  const seen: Seen = {};
  app.get('/things/:id', (req, res) => {
    seen.handledOnApp =
      Object.getPrototypeOf(req) === app.request && Object.getPrototypeOf(res) === app.response;
    res
      .status(201)
      .set('x-thing', String(req.params.id))
      .json({ accept: req.get('accept'), ip: req.ip, sameApp: req.app === app, nodeTypes: isNode(req, res) });
  });
  app.get('/fails', () => {
    throw new Error('on purpose');
  });
  app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).json({ failed: err.message });
  });
  const server = withClasses ? createServer({ ...expressMessageClasses(app) }, app) : createServer(app);
  // Listeners added before the app's run first: what Node built, before Express touched it.
  server.prependListener('request', (req, res) => {
    seen.builtOnApp =
      Object.getPrototypeOf(req) === app.request && Object.getPrototypeOf(res) === app.response;
  });
  return { app, server, seen };
}

function isNode(req: unknown, res: unknown): boolean {
  return req instanceof IncomingMessage && res instanceof ServerResponse;
}

describe('expressMessageClasses', () => {
  it('has Node build each request and response on the app prototypes, where Express leaves them', async () => {
    const { server, seen } = appAndServer(true);
    const answer = await request(server).get('/things/42').set('accept', 'application/json');
    expect(seen).toEqual({ builtOnApp: true, handledOnApp: true });
    expect(answer.status).toBe(201);
    expect(answer.headers['x-thing']).toBe('42');
    expect(answer.body).toEqual({
      accept: 'application/json',
      ip: expect.stringMatching(/127\.0\.0\.1|::1/),
      sameApp: true,
      nodeTypes: true,
    });
  });

  it('is what makes the difference: without it Node builds plain messages and Express moves them', async () => {
    const { server, seen } = appAndServer(false);
    await request(server).get('/things/42').expect(201);
    expect(seen).toEqual({ builtOnApp: false, handledOnApp: true });
  });

  it('keeps Express helpers on every path: an error handler answers a throwing route', async () => {
    const { server } = appAndServer(true);
    const answer = await request(server).get('/fails');
    expect(answer.status).toBe(500);
    expect(answer.body).toEqual({ failed: 'on purpose' });
  });

  it("keeps Express's own answers: an unknown path gets its 404", async () => {
    const { server } = appAndServer(true);
    const answer = await request(server).get('/nowhere');
    expect(answer.status).toBe(404);
    expect(answer.text).toContain('Cannot GET /nowhere');
  });
});
