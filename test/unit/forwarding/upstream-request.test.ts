// The request the forwarder hands http-proxy-middleware is enough for it: the real hpm and httpxy, with the
// forwarder's options, against a real loopback HTTP server, read nothing of it that UpstreamRequest does not declare.
import {
  Agent,
  type ClientRequest,
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyMiddleware } from 'http-proxy-middleware';
import {
  DETACHED_RESPONSE,
  takingUpstreamRequests,
  UPSTREAM_PROXY_OPTIONS,
  UpstreamRequest,
} from '../../../src/forwarding/internal/upstream-request';

const DECLARED = new Set<string | symbol>([
  'url',
  'method',
  'headers',
  'httpVersion',
  'httpVersionMajor',
  'httpVersionMinor',
  'socket',
  'on',
  'pipe',
]);

interface Received {
  readonly method?: string;
  readonly url?: string;
  readonly headers: IncomingMessage['headers'];
}

/** Listens for hpm's events and tells how the one call ended; the forwarder's options, minus its bookkeeping. */
function proxyTo(target: string, agent: Agent) {
  let ended: (outcome: string) => void = () => undefined;
  const outcome = new Promise<string>((resolve) => {
    ended = resolve;
  });
  const proxy = takingUpstreamRequests(
    createProxyMiddleware<IncomingMessage, ServerResponse>({
      target: new URL(target),
      agent,
      ...UPSTREAM_PROXY_OPTIONS,
      plugins: [
        (server) => {
          server.on('proxyReq', (proxyReq: ClientRequest) => proxyReq.end('{"a":1}'));
          server.on('proxyRes', (proxyRes: IncomingMessage) => {
            proxyRes.resume();
            ended(`answer ${proxyRes.statusCode}`);
          });
          server.on('error', (error: NodeJS.ErrnoException) => ended(`error ${error.code}`));
          server.on('econnreset', (error: NodeJS.ErrnoException) => ended(`econnreset ${error.code}`));
        },
      ],
    }),
  );
  return { proxy, outcome };
}

/** The request, watched: every property read of it is recorded. */
function watched(request: UpstreamRequest): { request: UpstreamRequest; reads: Set<string | symbol> } {
  const reads = new Set<string | symbol>();
  const proxy = new Proxy(request, {
    get(target, key, receiver) {
      reads.add(key);
      return Reflect.get(target, key, receiver);
    },
  });
  return { request: proxy, reads };
}

let server: Server;
let base: string;
let received: Received[] = [];
const agent = new Agent({ keepAlive: true });

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/reset') {
      req.socket.destroy();
      return;
    }
    req.resume();
    req.on('end', () => {
      received.push({ method: req.method, url: req.url, headers: req.headers });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  agent.destroy();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  received = [];
});

describe('UpstreamRequest through the real http-proxy-middleware', () => {
  test('is sent with its own method, path and headers, and nothing else of it is read', async () => {
    const { proxy, outcome } = proxyTo(base, agent);
    const { request, reads } = watched(
      new UpstreamRequest({ method: 'POST', path: '/api/validation/document' }, { 'x-request-id': 'r-1' }),
    );
    // Not awaited, as in the forwarder: httpxy settles it when the response closes, and this one never does.
    void proxy(request, DETACHED_RESPONSE);
    expect(await outcome).toBe('answer 200');
    expect(received).toEqual([
      expect.objectContaining({
        method: 'POST',
        url: '/api/validation/document',
        headers: expect.objectContaining({ 'x-request-id': 'r-1' }),
      }),
    ]);
    expect([...reads].filter((key) => !DECLARED.has(key))).toEqual([]);
    expect([...reads]).toEqual(expect.arrayContaining(['url', 'method', 'headers', 'pipe']));
  });

  test('a reset by the upstream is reported as econnreset with its code (the request has no socket)', async () => {
    const { proxy, outcome } = proxyTo(base, agent);
    const { request, reads } = watched(new UpstreamRequest({ method: 'GET', path: '/reset' }, {}));
    // Not awaited, as in the forwarder: httpxy settles it when the response closes, and this one never does.
    void proxy(request, DETACHED_RESPONSE);
    expect(await outcome).toBe('econnreset ECONNRESET');
    expect([...reads].filter((key) => !DECLARED.has(key))).toEqual([]);
    expect(reads.has('socket')).toBe(true);
  });
});
