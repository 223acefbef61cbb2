// What the forwarder's undici attempt makes of answers the simulator never gives: a body cut short, an answer larger
// than the gateway buffers (announced or not), a body that stalls after the head, a base URL with a path of its own.
// The provider here is a real HTTP server on loopback told how to misbehave; the caller is a real Express app.
import {
  createServer,
  get as httpGet,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { pino } from 'pino';
import {
  createForwarder,
  createUpstreamAgent,
  createUpstreamCircuits,
  createUpstreamPool,
  createUpstreamSlots,
} from '../../../src/forwarding';
import { createMetrics } from '../../../src/observability/metrics';
import { STATIC_TOKENS, serveForwardingCaller } from '../../support/forwarding-caller';

const MAX_ANSWER_BYTES = 64 * 1024;
const TIMEOUT_MS = 700;

/** How the provider answers the next calls. */
type Behaviour = (req: IncomingMessage, res: ServerResponse) => void;

let behaviour: Behaviour;
let seenPaths: string[] = [];
/** The forwarder's warnings, one JSON line each. */
const logLines: string[] = [];
/** The caller's upstream slots: every path gives its slot back. */
const slots = createUpstreamSlots({ limit: 4, queueTimeoutMs: 1_000 });
const openSockets = new Set<Socket>();
let closedSockets = 0;
const closers: (() => unknown)[] = [];

async function startProvider(): Promise<string> {
  const server: Server = createServer((req, res) => {
    seenPaths.push(req.url ?? '');
    req.resume();
    req.on('end', () => behaviour(req, res));
  });
  server.on('connection', (socket) => {
    openSockets.add(socket);
    socket.on('close', () => {
      openSockets.delete(socket);
      closedSockets += 1;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const socket of openSockets) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A gateway-shaped app over `baseUrl`: GET /read and POST /write forward to the provider's /api/thing. */
async function startCaller(baseUrl: string): Promise<string> {
  const pool = createUpstreamPool(baseUrl, { connections: 4, connectTimeoutMs: TIMEOUT_MS });
  closers.push(() => pool.destroy());
  const streamAgent = createUpstreamAgent(baseUrl, 4);
  closers.push(() => streamAgent.destroy());
  const forwarder = createForwarder({
    baseUrl,
    pool,
    streamAgent,
    slots,
    tokens: STATIC_TOKENS,
    circuits: createUpstreamCircuits(['thing'], {
      failureRatio: 0.5,
      windowMs: 10_000,
      minimumCalls: 1_000,
      resetMs: 1_000,
    }),
    timeoutMs: TIMEOUT_MS,
    staticHeaders: {},
    metrics: createMetrics(),
    logger: pino({ level: 'warn' }, { write: (line: string) => void logLines.push(line) }),
    maxAnswerBytes: MAX_ANSWER_BYTES,
  });
  return serveForwardingCaller(forwarder, { requestId: 'upstream-answers-test' }, closers);
}

let caller: string;

beforeAll(async () => {
  caller = await startCaller(await startProvider());
});

afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

beforeEach(() => {
  seenPaths = [];
});

const json = (res: ServerResponse, status: number, body: string) => {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

describe('answers the forwarder must not pass on as if whole', () => {
  test('a read answer compressed although the gateway asked for identity: 502, never packed bytes as JSON', async () => {
    let acceptEncoding: string | undefined;
    behaviour = (req, res) => {
      acceptEncoding = req.headers['accept-encoding'];
      const packed = gzipSync('{"secretField":"x"}');
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'content-length': packed.length,
      });
      res.end(packed);
    };
    const res = await fetch(`${caller}/read`);
    expect(acceptEncoding).toBe('identity');
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ status: { description: 'UPSTREAM_UNAVAILABLE' } });
  });

  test('a body cut short of its Content-Length: 502, never a truncated 200; a POST is an unknown outcome', async () => {
    behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"cut":');
      setTimeout(() => res.socket?.destroy(), 20);
    };
    const read = await fetch(`${caller}/read`);
    expect(read.status).toBe(502);
    expect(await read.json()).toMatchObject({ status: { description: 'UPSTREAM_UNAVAILABLE' } });
    // The GET was retried once on the reset, then failed: two calls, never a partial body.
    expect(seenPaths).toHaveLength(2);

    seenPaths = [];
    const write = await fetch(`${caller}/write`, { method: 'POST' });
    expect(write.status).toBe(502);
    expect(write.headers.get('x-upstream-unknown')).toBe('true');
    expect(seenPaths).toHaveLength(1);
  });

  test('an answer announced larger than the gateway buffers: 502, the socket dropped', async () => {
    const closedBefore = closedSockets;
    behaviour = (_req, res) => json(res, 200, `"${'x'.repeat(MAX_ANSWER_BYTES + 10)}"`);
    const res = await fetch(`${caller}/read`);
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ status: { description: 'UPSTREAM_UNAVAILABLE' } });
    expect(seenPaths).toHaveLength(1);
    await waitFor(() => closedSockets > closedBefore);
  });

  test('a chunked answer that grows past the limit without a Content-Length: 502 as well', async () => {
    behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = 'y'.repeat(8 * 1024);
      let sent = 0;
      const more = () => {
        if (res.destroyed) return;
        if (sent > MAX_ANSWER_BYTES * 2) {
          res.end();
          return;
        }
        sent += chunk.length;
        res.write(chunk, more);
      };
      more();
    };
    const res = await fetch(`${caller}/read`);
    expect(res.status).toBe(502);
    expect(seenPaths).toHaveLength(1);
  });

  test('an answer of exactly the limit passes whole, byte for byte', async () => {
    const body = `"${'z'.repeat(MAX_ANSWER_BYTES - 2)}"`;
    behaviour = (_req, res) => json(res, 200, body);
    const res = await fetch(`${caller}/read`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(body);
  });

  test('a head on time and a body that stalls: 504 UPSTREAM_TIMEOUT, and the stalled socket is closed', async () => {
    const closedBefore = closedSockets;
    behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '50' });
      res.write('{"slow":');
    };
    const res = await fetch(`${caller}/write`, { method: 'POST' });
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ status: { description: 'UPSTREAM_TIMEOUT' } });
    expect(res.headers.get('x-upstream-unknown')).toBe('true');
    await waitFor(() => closedSockets > closedBefore);
  });
});

describe('a provider redirect (3xx) is followed by nobody and reaches no caller', () => {
  const redirectTo = (status: number, location: string) => (_req: IncomingMessage, res: ServerResponse) => {
    const body = '{"moved":true}';
    res.writeHead(status, {
      location,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  };

  test.each([
    ['read', 'GET', 301],
    ['write', 'POST', 307],
    ['stream', 'GET', 302],
  ])(
    '/%s (%s) answered %i: 502 UPSTREAM_UNAVAILABLE, no Location, one call; the log names the origin only',
    async (path, method, status) => {
      behaviour = redirectTo(status, 'https://provider.example:8443/v2/api/thing?plan=secret-plan-id');
      logLines.length = 0;
      const res = await fetch(`${caller}/${path}`, { method, redirect: 'manual' });
      expect(res.status).toBe(502);
      expect(res.headers.get('location')).toBeNull();
      const text = await res.text();
      expect(JSON.parse(text)).toMatchObject({ status: { description: 'UPSTREAM_UNAVAILABLE' } });
      expect(text).not.toContain('provider.example');
      expect(seenPaths).toHaveLength(1);
      const line = logLines.find((l) => l.includes('redirect'));
      expect(JSON.parse(line ?? '{}')).toMatchObject({
        status,
        locationOrigin: 'https://provider.example:8443',
        sameOrigin: false,
      });
      expect(logLines.join('\n')).not.toContain('secret-plan-id');
    },
  );

  test('a relative Location is read against the base URL: same origin (a missing path prefix, say)', async () => {
    behaviour = redirectTo(308, '/api/thing/');
    logLines.length = 0;
    const res = await fetch(`${caller}/read`, { redirect: 'manual' });
    expect(res.status).toBe(502);
    const line = logLines.find((l) => l.includes('redirect'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({ status: 308, sameOrigin: true });
  });
});

describe('a provider 4xx that is not JSON is no verdict of the provider API (its load balancer, a wrong path)', () => {
  const answer = (
    status: number,
    type: string | undefined,
    body: string,
    extra: Record<string, string> = {},
  ) =>
    ((_req: IncomingMessage, res: ServerResponse) => {
      res.writeHead(status, {
        ...(type && { 'content-type': type }),
        'content-length': Buffer.byteLength(body),
        ...extra,
      });
      res.end(body);
    }) satisfies Behaviour;

  test('an HTML 404 (a wrong UPSTREAM_BASE_URL path): 502 UPSTREAM_UNAVAILABLE, never the page; logged with its type', async () => {
    behaviour = answer(404, 'text/html; charset=utf-8', '<html><body>nginx: Not Found</body></html>');
    logLines.length = 0;
    const res = await fetch(`${caller}/read`);
    expect(res.status).toBe(502);
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({ status: { description: 'UPSTREAM_UNAVAILABLE' } });
    expect(text).not.toContain('nginx');
    expect(seenPaths).toHaveLength(1);
    const line = logLines.find((l) => l.includes('not JSON'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({ status: 404, contentType: 'text/html' });
  });

  test('an HTML 429: 503 UPSTREAM_RATE_LIMITED with the provider’s Retry-After', async () => {
    behaviour = answer(429, 'text/html', '<html>slow down</html>', { 'retry-after': '9' });
    const res = await fetch(`${caller}/write`, { method: 'POST' });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('9');
    expect(await res.json()).toMatchObject({ status: { description: 'UPSTREAM_RATE_LIMITED' } });
  });

  test('JSON of any flavour (problem+json) and an empty 4xx pass as the provider’s own answers', async () => {
    behaviour = answer(422, 'application/problem+json', '{"title":"bad"}');
    const problem = await fetch(`${caller}/read`);
    expect(problem.status).toBe(422);
    expect(await problem.json()).toEqual({ title: 'bad' });
    behaviour = answer(404, undefined, '');
    const empty = await fetch(`${caller}/read`);
    expect(empty.status).toBe(404);
    expect(await empty.text()).toBe('');
  });

  test('a streamed operation’s HTML 4xx as well: 502, never piped; its JSON 4xx and its HTML 200 are piped', async () => {
    behaviour = answer(404, 'text/html', '<html>no such export</html>');
    const page = await fetch(`${caller}/stream`);
    expect(page.status).toBe(502);
    expect(await page.text()).not.toContain('no such export');
    behaviour = answer(404, 'application/json', '{"detail":"no such export"}');
    const refusal = await fetch(`${caller}/stream`);
    expect(refusal.status).toBe(404);
    expect(await refusal.json()).toEqual({ detail: 'no such export' });
    behaviour = answer(200, 'text/html', '<html>the statement</html>');
    const statement = await fetch(`${caller}/stream`);
    expect(statement.status).toBe(200);
    expect(await statement.text()).toBe('<html>the statement</html>');
  });

  test('a streamed HTML 404 without a length, its body running to the close (HTTP/1.0 style): 502, never piped', async () => {
    behaviour = (req, res) => {
      req.socket.end(
        'HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n<html>gone</html>',
      );
      res.detachSocket?.(req.socket);
    };
    const res = await fetch(`${caller}/stream`);
    expect(res.status).toBe(502);
    expect(await res.text()).not.toContain('gone');
  });

  test('a streamed HTML 429 without Retry-After: 503 UPSTREAM_RATE_LIMITED with Retry-After 1', async () => {
    behaviour = (_req, res) => {
      res.writeHead(429, { 'content-type': 'text/html', 'transfer-encoding': 'chunked' });
      res.end('<html>slow down</html>');
    };
    const res = await fetch(`${caller}/stream`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toMatchObject({ status: { description: 'UPSTREAM_RATE_LIMITED' } });
  });
});

describe('streamed answers (answer: "stream") from a provider that stalls', () => {
  test('a head, some bytes, then nothing: the answer is cut after the timeout and the provider socket closed', async () => {
    const closedBefore = closedSockets;
    behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/csv', 'content-length': '1000' });
      res.write('id,amount\n');
    };
    const started = Date.now();
    const res = await fetch(`${caller}/stream`);
    expect(res.status).toBe(200);
    // The caller's answer never ends as whole: reading it fails once the gateway cuts it.
    await expect(res.text()).rejects.toThrow();
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    await waitFor(() => closedSockets > closedBefore);
  });

  test('a 401 whose body never comes does not hold the call: renewed once, retried, streamed', async () => {
    let calls = 0;
    behaviour = (_req, res) => {
      calls += 1;
      if (calls === 1) {
        res.writeHead(401, { 'content-type': 'application/json', 'content-length': '500' });
        res.write('{"detail":');
        return;
      }
      json(res, 200, '{"rows":3}');
    };
    const res = await fetch(`${caller}/stream`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('{"rows":3}');
    expect(calls).toBe(2);
  });
});

describe('streamed answers (answer: "stream") to callers and bodies the flow must not spoil', () => {
  test('a gzip-encoded answer keeps its Content-Encoding: the caller can read what the provider sent', async () => {
    const plain = 'id,amount\n'.repeat(2_000);
    const packed = gzipSync(plain);
    behaviour = (_req, res) => {
      res.writeHead(200, {
        'content-type': 'text/csv',
        'content-encoding': 'gzip',
        'content-length': packed.length,
      });
      res.end(packed);
    };
    const res = await fetch(`${caller}/stream`);
    expect(res.status).toBe(200);
    // fetch decodes a gzip body only when told it is one: without the header the caller gets the packed bytes.
    expect(await res.text()).toBe(plain);
  });

  test('a provider that sends more than its Content-Length: the caller gets the announced bytes, the next call works', async () => {
    behaviour = (req, res) => {
      // The head and the body by hand, past the announced length, on the same socket.
      req.socket.write(
        'HTTP/1.1 200 OK\r\ncontent-type: text/csv\r\ncontent-length: 10\r\n\r\nid,amount\nEXTRA BYTES',
      );
      res.detachSocket?.(req.socket);
    };
    const first = await fetch(`${caller}/stream`);
    expect(first.status).toBe(200);
    expect(await first.text()).toBe('id,amount\n');
    behaviour = (_req, res) => json(res, 200, '{"rows":1}');
    const second = await fetch(`${caller}/stream`);
    expect(second.status).toBe(200);
    expect(await second.text()).toBe('{"rows":1}');
    await waitFor(() => slots.active === 0);
    expect(slots.active).toBe(0);
  });

  test('a provider that resets its socket mid-answer: the caller is cut, the slot given back', async () => {
    behaviour = (req, res) => {
      res.writeHead(200, { 'content-type': 'text/csv', 'content-length': '1000' });
      res.write('id,amount\n', () => req.socket.resetAndDestroy());
    };
    const res = await fetch(`${caller}/stream`);
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
    await waitFor(() => slots.active === 0);
    expect(slots.active).toBe(0);
  });

  test('a caller who stops reading for the timeout is cut, and the log blames the caller, not the provider', async () => {
    // The provider sends all of it at once; the gateway pauses it only because its caller reads nothing.
    const size = 32 * 1024 * 1024;
    const body = Buffer.alloc(size, 'x');
    behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/csv', 'content-length': size });
      res.end(body);
    };
    logLines.length = 0;
    const received = await new Promise<number>((resolve) => {
      const req = httpGet(`${caller}/stream`, (res) => {
        res.pause();
        setTimeout(() => {
          let bytes = 0;
          res.on('data', (chunk: Buffer) => {
            bytes += chunk.length;
          });
          res.on('close', () => resolve(bytes));
          res.on('error', () => undefined);
          res.resume();
        }, 2 * TIMEOUT_MS);
      });
      req.on('error', () => undefined);
    });
    // The slot is not held for as long as a caller declines to read: the answer is cut.
    expect(received).toBeLessThan(size);
    const messages = logLines.map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages).toContain('caller not reading while streaming');
    expect(messages).not.toContain('upstream answer stalled while streaming');
    await waitFor(() => slots.active === 0);
    expect(slots.active).toBe(0);
  });
});

describe('a base URL with a path of its own', () => {
  test("the provider is called at the base URL's path followed by the operation's", async () => {
    const prefixed = await startCaller(`${await startProvider()}/provider/v1/`);
    behaviour = (_req, res) => json(res, 200, '{"ok":true}');
    const res = await fetch(`${prefixed}/read`);
    expect(res.status).toBe(200);
    expect(seenPaths).toEqual(['/provider/v1/api/thing']);
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('answers shaped unusually, but whole', () => {
  test('a 103 Early Hints before the 200: the 200 and its body, nothing of the hint', async () => {
    behaviour = (_req, res) => {
      res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' }, () =>
        json(res, 200, '{"after":"hints"}'),
      );
    };
    const res = await fetch(`${caller}/read`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('{"after":"hints"}');
    expect(res.headers.get('content-type')).toBe('application/json');
  });

  test('a Content-Type sent twice: the first one reaches the caller (as Node http kept it), not none', async () => {
    behaviour = (_req, res) => {
      res.setHeader('content-type', ['application/json', 'text/plain']);
      res.end('{"twice":true}');
    };
    const res = await fetch(`${caller}/read`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
  });

  test('a 429 with Retry-After sent twice: the first one reaches the caller', async () => {
    behaviour = (_req, res) => {
      res.setHeader('retry-after', ['7', '9']);
      json(res, 429, '{"slow":"down"}');
    };
    const res = await fetch(`${caller}/write`, { method: 'POST' });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
  });

  test('a 204 without a body: 204, on a connection the next call can reuse', async () => {
    behaviour = (_req, res) => {
      res.writeHead(204);
      res.end();
    };
    const res = await fetch(`${caller}/write`, { method: 'POST' });
    expect(res.status).toBe(204);
    behaviour = (_req, res) => json(res, 200, '{"next":1}');
    const next = await fetch(`${caller}/read`);
    expect(await next.text()).toBe('{"next":1}');
  });
});
