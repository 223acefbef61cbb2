// listenSpread and closeServer on real loopback sockets: connections the kernel gives the extra sockets reach the one
// HTTP server, and closing waits for the requests of every socket, not only of the first.
import { Agent, createServer, get, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { closeServer, listenSpread } from '../../../src/http/accept-sockets';
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
  let extra: readonly NetServer[];
  let url: string;
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });

  beforeAll(async () => {
    server = createServer((req, res) => held.push({ req, res }));
    ({ extra } = await listenSpread(server, { host: '127.0.0.1', port: 0, backlog: 511, acceptSockets: 16 }));
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
    const closing = closeServer(server, 10_000, extra).then(() => {
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
