import { once } from 'node:events';
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import fc from 'fast-check';
import { errorEnvelopeHandler } from '../../../src/http/error-envelope';
import { GatewayError } from '../../../src/http/gateway-error';
import { jsonBody } from '../../../src/http/json-body';
import { waitFor } from '../../support/ports';

const LIMIT = 256;

/** What the gateway used before the direct read: type-is, then body-parser for every request. */
function bodyParserOnly(limitBytes: number): RequestHandler[] {
  const requireJson: RequestHandler = (req, _res, next) => {
    next(
      req.is('application/json')
        ? undefined
        : new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'The request body must be application/json.'),
    );
  };
  return [requireJson, express.json({ limit: limitBytes, strict: true, type: () => true })];
}

/** Marks the requests body-parser read (the direct read leaves `req.viaBodyParser` unset). */
function countingBodyParser(): void {
  const original = express.json;
  jest.spyOn(express, 'json').mockImplementation((options) => {
    const parser = original(options);
    const counting: ReturnType<typeof express.json> = (req, res, next) => {
      (req as { viaBodyParser?: boolean }).viaBodyParser = true;
      parser(req, res, next);
    };
    return counting;
  });
}

function echoApp(readBody: RequestHandler | RequestHandler[]) {
  const app = express();
  const echo: RequestHandler = (req, res) => {
    res.json({ body: req.body, viaBodyParser: (req as { viaBodyParser?: boolean }).viaBodyParser === true });
  };
  app.post('/echo', readBody, echo);
  app.use(errorEnvelopeHandler());
  return app;
}

interface Sent {
  readonly headers: Record<string, string>;
  readonly bytes: Buffer;
  /** Sent with Transfer-Encoding: chunked instead of a Content-Length. */
  readonly chunked?: boolean;
}

interface Answer {
  readonly status: number;
  readonly json: { body?: unknown; viaBodyParser?: boolean; status?: unknown; errors?: unknown };
}

let direct: Server;
let reference: Server;

beforeAll(async () => {
  countingBodyParser();
  direct = echoApp(jsonBody(LIMIT)).listen(0, '127.0.0.1');
  reference = echoApp(bodyParserOnly(LIMIT)).listen(0, '127.0.0.1');
  await Promise.all([once(direct, 'listening'), once(reference, 'listening')]);
});

afterAll(async () => {
  for (const server of [direct, reference]) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  jest.restoreAllMocks();
});

async function post(server: Server, sent: Sent): Promise<Answer> {
  const { port } = server.address() as AddressInfo;
  const headers = sent.chunked
    ? sent.headers
    : { ...sent.headers, 'content-length': String(sent.bytes.length) };
  const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/echo', headers, agent: false });
  if (sent.chunked) {
    req.write(sent.bytes.subarray(0, 3));
    req.end(sent.bytes.subarray(3));
  } else req.end(sent.bytes);
  const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return { status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
}

/** Announces a 100-byte JSON body, sends 11 bytes of it, and hangs up. */
async function hangUpMidBody(server: Server, path: string): Promise<void> {
  const { port } = server.address() as AddressInfo;
  const req = httpRequest({
    host: '127.0.0.1',
    port,
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json', 'content-length': '100' },
    agent: false,
  });
  req.on('error', () => {});
  req.write('{"country":');
  await new Promise((resolve) => setTimeout(resolve, 20));
  req.destroy();
}

type Framing = 'none' | 'bom' | 'gzip' | 'chunked';
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const bodyBytes = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v))),
  fc.object({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v, null, 2))),
  fc.string({ maxLength: 40 }).map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
  fc.constantFrom<string>(
    '',
    ' ',
    '\n\t {"a":1} ',
    '{"a":',
    '[1,2',
    'null',
    '"text"',
    '7',
    '{"__proto__":{"x":1}}',
  ),
  fc.string({ minLength: LIMIT, maxLength: LIMIT + 40 }).map((s) => Buffer.from(JSON.stringify({ s }))),
);
const bytesOf = (body: Buffer | string) => (typeof body === 'string' ? Buffer.from(body) : body);
const contentType = fc.constantFrom<string>(
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'Application/JSON; Charset=UTF-8',
  'application/json;charset=utf-8',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/vnd.api+json',
  'text/plain',
  'application/jsonx',
);

describe('jsonBody', () => {
  it('answers exactly as body-parser alone would, for any body, type, encoding and framing', async () => {
    await fc.assert(
      fc.asyncProperty(
        bodyBytes,
        contentType,
        fc.boolean(),
        fc.constantFrom<Framing>('none', 'bom', 'gzip', 'chunked'),
        async (raw, type, withType, framing) => {
          let bytes = bytesOf(raw);
          const headers: Record<string, string> = withType ? { 'content-type': type } : {};
          if (framing === 'bom') bytes = Buffer.concat([BOM, bytes]);
          if (framing === 'gzip') {
            bytes = gzipSync(bytes);
            headers['content-encoding'] = 'gzip';
          }
          const sent = { headers, bytes, chunked: framing === 'chunked' };
          const [fromDirect, fromReference] = await Promise.all([post(direct, sent), post(reference, sent)]);
          expect(fromDirect.status).toBe(fromReference.status);
          expect(fromDirect.json.body).toEqual(fromReference.json.body);
          expect(fromDirect.json.status).toEqual(fromReference.json.status);
          expect(fromDirect.json.errors).toEqual(fromReference.json.errors);
        },
      ),
      {
        numRuns: 400,
        // The edges of the direct read, always tried: empty, BOM-only, blank, broken, not an object or array.
        examples: [
          ['', 'application/json', true, 'none'],
          ['', 'application/json', true, 'bom'],
          [' \n', 'application/json', true, 'none'],
          ['{"a":', 'application/json; charset=utf-8', true, 'none'],
          ['"text"', 'application/json', true, 'none'],
          ['{"a":1}', 'application/json', true, 'bom'],
        ],
      },
    );
  });

  it('refuses a plain JSON body declared over the limit as body-parser would (a latin1 one gets 415 first), before reading it', async () => {
    const big = Buffer.from(JSON.stringify({ s: 'x'.repeat(LIMIT) }));
    for (const type of [
      'application/json',
      'application/json; charset=utf-16',
      'application/json; charset=latin1',
    ]) {
      const sent = { headers: { 'content-type': type }, bytes: big };
      const [fromDirect, fromReference] = await Promise.all([post(direct, sent), post(reference, sent)]);
      expect([fromDirect.status, fromDirect.json.status]).toEqual([
        fromReference.status,
        fromReference.json.status,
      ]);
    }
    // Declared, never sent: the answer comes all the same (body-parser would wait for the body). What Node does with a
    // body sent after the answer (reads it off, serves what follows) is in test/resilience/protocol-errors.test.ts.
    const { port } = direct.address() as AddressInfo;
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/echo',
      headers: { 'content-type': 'application/json', 'content-length': '99999999' },
      agent: false,
    });
    req.on('error', () => {});
    req.flushHeaders();
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    res.resume();
    expect(res.statusCode).toBe(413);
    req.destroy();
  });

  it('reads a plain JSON body itself and leaves compressed or chunked bodies to body-parser', async () => {
    const body = Buffer.from('{"country":"ARG"}');
    const plain = await post(direct, { headers: { 'content-type': 'application/json' }, bytes: body });
    expect(plain).toEqual({ status: 200, json: { body: { country: 'ARG' }, viaBodyParser: false } });
    const gzip = await post(direct, {
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      bytes: gzipSync(body),
    });
    expect(gzip).toEqual({ status: 200, json: { body: { country: 'ARG' }, viaBodyParser: true } });
    const chunked = await post(direct, {
      headers: { 'content-type': 'application/json' },
      bytes: body,
      chunked: true,
    });
    expect(chunked).toEqual({ status: 200, json: { body: { country: 'ARG' }, viaBodyParser: true } });
  });

  it('ends the request with request.aborted when the caller hung up before the body was read', async () => {
    // An earlier middleware (the rate limiter, say) is still waiting when the caller goes away.
    const seen: unknown[] = [];
    const app = express();
    app.post(
      '/late',
      (_req, _res, next) => {
        setTimeout(next, 60);
      },
      jsonBody(LIMIT),
      (_req, res) => {
        res.end();
      },
    );
    app.use((error: { type?: string }, _req: Request, res: Response, _next: NextFunction) => {
      seen.push(error.type);
      res.end();
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      await hangUpMidBody(server, '/late');
      await waitFor(() => seen.length > 0, { timeoutMs: 2_000, what: 'the body error' });
      expect(seen).toEqual(['request.aborted']);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('keeps serving after a caller hangs up halfway through a body', async () => {
    await hangUpMidBody(direct, '/echo');
    const after = await post(direct, {
      headers: { 'content-type': 'application/json' },
      bytes: Buffer.from('[1]'),
    });
    expect(after).toEqual({ status: 200, json: { body: [1], viaBodyParser: false } });
  });
});
