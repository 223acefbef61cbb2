// The upstream keep-alive pool: sockets a burst of calls opened are reused by the next burst, not closed and reopened.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createUpstreamAgent } from '../../../src/forwarding/internal/upstream-agent';

let server: Server;
let baseUrl: string;
let connections = 0;
/** Answers wait until every call of the burst has arrived, so the burst really holds that many sockets at once. */
let holding: Array<() => void> = [];
let burstSize = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    holding.push(() => res.end('{}'));
    if (holding.length === burstSize) {
      for (const answer of holding) answer();
      holding = [];
    }
  });
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function burst(agent: ReturnType<typeof createUpstreamAgent>, size: number): Promise<void> {
  burstSize = size;
  await Promise.all(
    Array.from(
      { length: size },
      () =>
        new Promise<void>((resolve, reject) => {
          const req = request(`${baseUrl}/`, { agent }, (res) => {
            res.resume();
            res.once('end', () => resolve());
          });
          req.once('error', reject);
          req.end();
        }),
    ),
  );
}

test('a second burst as wide as the first reuses every socket of the first (no connection churn)', async () => {
  const agent = createUpstreamAgent(baseUrl, 1024);
  try {
    connections = 0;
    await burst(agent, 200);
    expect(connections).toBe(200);
    // Let the agent take back the sockets of the last answers.
    await new Promise((resolve) => setImmediate(resolve));
    await burst(agent, 200);
    expect(connections).toBe(200);
  } finally {
    agent.destroy();
  }
});

test('the pool never holds more sockets than UPSTREAM_MAX_SOCKETS, busy or free', () => {
  const agent = createUpstreamAgent(baseUrl, 8);
  try {
    expect(agent.maxSockets).toBe(8);
    expect(agent.maxFreeSockets).toBeLessThanOrEqual(8);
  } finally {
    agent.destroy();
  }
});
