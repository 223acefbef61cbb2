// listenSpread and closeServer on real loopback sockets: connections the kernel gives the extra sockets reach the one
// HTTP server, and closing waits for the requests of every socket, not only of the first.
import { Agent, createServer, get, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  type AddressInfo,
  connect,
  createServer as createNetServer,
  type Server as NetServer,
} from 'node:net';
import {
  closeServer,
  connectionListOf,
  type Listening,
  listenSpread,
} from '../../../src/http/accept-sockets';
import { waitFor } from '../../support/ports';

function answerOf(url: string, agent: Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, { agent }, (res) => {
      let body = '';
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

describe('listenSpread and closeServer', () => {
  const held: { req: IncomingMessage; res: ServerResponse }[] = [];
  let server: Server;
  let listening: Listening;
  let extra: readonly NetServer[];
  let url: string;
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });

  beforeAll(async () => {
    server = createServer((req, res) => held.push({ req, res }));
    listening = await listenSpread(server, { host: '127.0.0.1', port: 0, backlog: 511, acceptSockets: 16 });
    extra = listening.extra;
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(() => agent.destroy());

  it('serves the connections of all 16 sockets through the one server; closing waits for those of the extra ones', async () => {
    expect(extra).toHaveLength(15);
    const answers = Array.from({ length: 32 }, () => answerOf(url, agent));
    await waitFor(() => held.length === 32, { what: '32 requests held' });
    // Node's net server marks each socket it accepts (`_server`; the HTTP server sets `server` to itself on all).
    const acceptedBy = (h: (typeof held)[number]) =>
      (h.req.socket as unknown as { _server: unknown })._server;
    const onFirst = held.filter((h) => acceptedBy(h) === server);
    const onExtra = held.filter((h) => acceptedBy(h) !== server);
    expect(onExtra.length).toBeGreaterThan(0);
    expect(onExtra.every((h) => extra.includes(acceptedBy(h) as NetServer))).toBe(true);

    let closed = false;
    const closing = closeServer(server, 10_000, listening).then(() => {
      closed = true;
    });
    for (const h of onFirst) h.res.end('first');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(closed).toBe(false); // the extra sockets' requests are still in flight
    for (const h of onExtra) h.res.end('extra');
    await closing;
    expect((await Promise.all(answers)).sort()).toEqual(
      [...Array(onExtra.length).fill('extra'), ...Array(onFirst.length).fill('first')].sort(),
    );
    expect(server.listening).toBe(false);
    expect(extra.every((acceptor) => !acceptor.listening)).toBe(true);
  });

  it('every extra socket hands its connections the HTTP server’s socket options (no delay, half-open, keep-alive)', async () => {
    const own = server as unknown as Record<string, unknown>;
    expect(own.noDelay).toBe(true);
    for (const acceptor of extra) {
      const options = acceptor as unknown as Record<string, unknown>;
      for (const name of ['noDelay', 'allowHalfOpen', 'keepAlive', 'keepAliveInitialDelay', 'highWaterMark'])
        expect([name, options[name]]).toEqual([name, own[name]]);
    }
  });

  it('a port held by another gateway starting in the same instant (its lock) is refused, though the port is free', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    const other = createNetServer();
    await new Promise<void>((resolve) =>
      other.listen({ path: `\0payments-bff-gateway:127.0.0.1:${port}` }, resolve),
    );
    const late = createServer();
    await expect(listenSpread(late, { host: '127.0.0.1', port, acceptSockets: 16 })).rejects.toMatchObject({
      code: 'EADDRINUSE',
    });
    expect(late.listening).toBe(false);
    // Once the other lets go, the port is the gateway's; closing it frees port and lock for the next.
    await new Promise((resolve) => other.close(resolve));
    const first = await listenSpread(late, { host: '127.0.0.1', port, acceptSockets: 16 });
    await closeServer(late, 1_000, first);
    const next = createServer();
    await closeServer(next, 1_000, await listenSpread(next, { host: '127.0.0.1', port, acceptSockets: 16 }));
  });

  it('a host name is looked up once: every socket binds the same address', async () => {
    const named = createServer();
    const spread = await listenSpread(named, { host: 'localhost', port: 0, acceptSockets: 8 });
    const addresses = [named, ...spread.extra].map((s) => (s.address() as AddressInfo).address);
    expect(new Set(addresses).size).toBe(1);
    await closeServer(named, 1_000, spread);
  });

  it('one socket: no extra socket, no SO_REUSEPORT (a second listener on the port is refused)', async () => {
    const single = createServer();
    const { extra: none } = await listenSpread(single, { host: '127.0.0.1', port: 0, acceptSockets: 1 });
    expect(none).toEqual([]);
    const { port } = single.address() as AddressInfo;
    await expect(
      listenSpread(createServer(), { host: '127.0.0.1', port, acceptSockets: 4 }),
    ).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await closeServer(single, 1_000);
  });
});

describe('closeServer and an answer still being flushed', () => {
  const ANSWER_BYTES = 16 * 1024 * 1024; // more than loopback's socket buffers hold: the server is still writing

  it('a drain lets a slow reader receive the whole of an answer that had ended, then closes its idle connection', async () => {
    let ended = false;
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': ANSWER_BYTES });
      res.end(Buffer.alloc(ANSWER_BYTES, 120));
      ended = true;
    });
    const listening = await listenSpread(server, { host: '127.0.0.1', port: 0, acceptSockets: 4 });
    expect(connectionListOf(server)).toBeDefined(); // the list the sweep reads is where this Node keeps it
    const { port } = server.address() as AddressInfo;
    const reader = connect(port, '127.0.0.1');
    reader.pause(); // a slow reader: nothing is read until the drain has swept several times
    reader.write('GET /large HTTP/1.1\r\nhost: gateway\r\n\r\n');
    await waitFor(() => ended, { what: 'the answer ended' });

    let closed = false;
    const closing = closeServer(server, 20_000, listening).then(() => {
      closed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 300)); // six sweeps of idle connections
    const received: Buffer[] = [];
    const readerClosed = new Promise((resolve) => reader.once('close', resolve));
    reader.on('data', (chunk: Buffer) => received.push(chunk));
    reader.resume();
    await readerClosed; // the server closes the connection once it is idle
    await closing;

    const answer = Buffer.concat(received);
    const headEnd = answer.indexOf('\r\n\r\n') + 4;
    expect(answer.subarray(0, 12).toString()).toBe('HTTP/1.1 200');
    expect(answer.length - headEnd).toBe(ANSWER_BYTES);
    expect(closed).toBe(true);
  });
});
