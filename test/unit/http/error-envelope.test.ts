import { gzipSync } from 'node:zlib';
import express from 'express';
import request from 'supertest';
import { errorEnvelopeHandler } from '../../../src/http/error-envelope';
import { GatewayError } from '../../../src/http/gateway-error';
import { jsonBody } from '../../../src/http/json-body';
import { requestId } from '../../../src/http/request-id';
import { methodNotAllowed, notFound } from '../../../src/http/unmatched';

function appThatThrows(error: unknown) {
  const app = express();
  app.use(requestId());
  app.get('/boom', () => {
    throw error;
  });
  app.get('/item/:id', (req, res) => {
    res.json({ id: req.params.id });
  });
  app.post('/echo', jsonBody(64), (req, res) => {
    res.json(req.body);
  });
  app.all('/echo', methodNotAllowed('POST'));
  app.use(notFound());
  app.use(errorEnvelopeHandler());
  return app;
}

describe('the error envelope', () => {
  it('renders a GatewayError with its status, reason, detail and the request id', async () => {
    const res = await request(
      appThatThrows(new GatewayError('CLIENT_FORBIDDEN', 'Missing scope plans:read.')),
    )
      .get('/boom')
      .set('x-request-id', 'req-123');
    expect(res.status).toBe(403);
    expect(res.headers['x-request-id']).toBe('req-123');
    expect(res.body).toEqual({
      status: { code: '403', description: 'CLIENT_FORBIDDEN', detail: 'Missing scope plans:read.' },
      requestId: 'req-123',
    });
  });

  it('adds errors to INVALID_REQUEST and headers such as Retry-After', async () => {
    const error = new GatewayError('INVALID_REQUEST', 'Bad body.', {
      errors: [{ path: 'country', message: 'bad' }],
    });
    const res = await request(appThatThrows(error)).get('/boom');
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual([{ path: 'country', message: 'bad' }]);
    const open = new GatewayError('UPSTREAM_UNAVAILABLE', 'Open.', {
      status: 503,
      headers: { 'retry-after': '10' },
    });
    const openRes = await request(appThatThrows(open)).get('/boom');
    expect(openRes.status).toBe(503);
    expect(openRes.headers['retry-after']).toBe('10');
    expect(openRes.body.status.description).toBe('UPSTREAM_UNAVAILABLE');
  });

  it('turns an unexpected error into a 500 envelope without its message', async () => {
    const res = await request(appThatThrows(new Error('db password is hunter2'))).get('/boom');
    expect(res.status).toBe(500);
    expect(res.body.status.description).toBe('INTERNAL_ERROR');
    expect(JSON.stringify(res.body)).not.toContain('hunter2');
  });

  it('generates a request id when the incoming one is missing or malformed', async () => {
    const app = appThatThrows(new GatewayError('NOT_FOUND', 'x'));
    const generated = await request(app).get('/boom');
    expect(generated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(generated.body.requestId).toBe(generated.headers['x-request-id']);
    const injected = await request(app).get('/boom').set('x-request-id', 'a b<script>');
    expect(injected.headers['x-request-id']).not.toContain('script');
  });

  it('answers 404 NOT_FOUND, 405 with Allow, 415, 413 and 400 for bad JSON', async () => {
    const app = appThatThrows(new Error('unused'));
    const missing = await request(app).get('/nope');
    expect(missing.status).toBe(404);
    expect(missing.body.status.description).toBe('NOT_FOUND');
    const wrongMethod = await request(app).delete('/echo');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe('POST');
    const text = await request(app).post('/echo').set('content-type', 'text/plain').send('hello');
    expect(text.status).toBe(415);
    expect(text.body.status.description).toBe('UNSUPPORTED_MEDIA_TYPE');
    const big = await request(app)
      .post('/echo')
      .set('content-type', 'application/json')
      .send(JSON.stringify({ a: 'x'.repeat(100) }));
    expect(big.status).toBe(413);
    expect(big.body.status.description).toBe('PAYLOAD_TOO_LARGE');
    const broken = await request(app).post('/echo').set('content-type', 'application/json').send('{"a":');
    expect(broken.status).toBe(400);
    expect(broken.body.status.description).toBe('INVALID_REQUEST');
  });

  it('answers 400 INVALID_REQUEST, not 500, for a path parameter that is not valid percent-encoding', async () => {
    const res = await request(appThatThrows(new Error('unused'))).get('/item/%ZZ');
    expect(res.status).toBe(400);
    expect(res.body.status.description).toBe('INVALID_REQUEST');
  });
  it('answers 400, not 500, for a compressed body that does not decompress (corrupt or cut short)', async () => {
    const app = appThatThrows(new Error('unused'));
    const whole = gzipSync('{"country":"ARG"}');
    const bodies: [string, Buffer][] = [
      ['gzip', Buffer.from('not gzip at all')],
      ['gzip', whole.subarray(0, 12)],
      ['deflate', Buffer.from('not deflate')],
      ['br', Buffer.from('not brotli')],
      // Node 24 decompresses zstd, and body-parser 2.4 accepts it: its errors carry ZSTD_ codes of their own.
      ['zstd', Buffer.from('not zstd')],
    ];
    for (const [encoding, bytes] of bodies) {
      const res = await request(app)
        .post('/echo')
        .set('content-type', 'application/json')
        .set('content-encoding', encoding)
        .send(bytes);
      expect({ encoding, status: res.status, reason: res.body.status?.description }).toEqual({
        encoding,
        status: 400,
        reason: 'INVALID_REQUEST',
      });
    }
  });
});

describe("every body-parser error is the caller's mistake (issue 42)", () => {
  /** The form parser of /bff/backchannel-logout, and an app whose handlers raise what body-parser raises. */
  function formApp() {
    const app = express();
    app.use(requestId());
    app.post(
      '/form',
      express.urlencoded({ extended: false, limit: '1kb', parameterLimit: 10 }),
      (_req, res) => {
        res.json({ ok: true });
      },
    );
    app.use(errorEnvelopeHandler());
    return app;
  }

  it('a form with more fields than parameterLimit is 413 PAYLOAD_TOO_LARGE in the envelope, not a 500', async () => {
    const fields = Array.from({ length: 11 }, (_, i) => `f${i}=v`).join('&');
    const res = await request(formApp())
      .post('/form')
      .set('content-type', 'application/x-www-form-urlencoded')
      .set('x-request-id', 'too-many-fields')
      .send(fields);
    expect(res.status).toBe(413);
    expect(res.body).toEqual({
      status: { code: '413', description: 'PAYLOAD_TOO_LARGE', detail: expect.any(String) },
      requestId: 'too-many-fields',
    });
  });

  it.each([
    ['parameters.too.many', 413, 413, 'PAYLOAD_TOO_LARGE'],
    ['entity.too.large', 413, 413, 'PAYLOAD_TOO_LARGE'],
    ['entity.parse.failed', 400, 400, 'INVALID_REQUEST'],
    ['entity.verify.failed', 403, 400, 'INVALID_REQUEST'],
    ['encoding.unsupported', 415, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['charset.unsupported', 415, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['request.aborted', 400, 400, 'INVALID_REQUEST'],
    ['request.size.invalid', 400, 400, 'INVALID_REQUEST'],
    ['stream.encoding.set', 500, 400, 'INVALID_REQUEST'],
    ['stream.not.readable', 500, 400, 'INVALID_REQUEST'],
    ['querystring.parse.rangeError', 400, 400, 'INVALID_REQUEST'],
    // A type a later body-parser may add: its 4xx status decides.
    ['entity.something.new', 413, 413, 'PAYLOAD_TOO_LARGE'],
    ['entity.something.else', 422, 400, 'INVALID_REQUEST'],
  ])('type %s (body-parser status %i) is %i %s', async (type, status, expected, reason) => {
    const error = Object.assign(new Error(type), { type, status, expose: status < 500, body: 'raw' });
    const res = await request(appThatThrows(error)).get('/boom');
    expect([res.status, res.body.status?.description]).toEqual([expected, reason]);
  });
});
