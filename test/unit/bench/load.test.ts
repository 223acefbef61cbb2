// The bench's load run against a real loopback server that never answers one of its connections: the caller left
// waiting is counted in the percentiles at what it had waited when the run stopped, and among those waiting > 1 s.
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { runLoad } from '../../../bench/lib/load';

describe('runLoad', () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    let first: Socket | undefined;
    server = createServer((req, res) => {
      first ??= req.socket;
      if (req.socket === first) return; // this connection's request is never answered
      setTimeout(() => res.end('ok'), 100);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('counts a caller left unanswered for the whole run in p99 and in waitingOverSecond; the answers alone do not show it', async () => {
    const result = await runLoad({ url, method: 'GET', headers: {}, durationSeconds: 2, connections: 3 });
    // Two connections answered every ~100 ms for 2 s: ~40 answers, and one wait of ~2 s cut by the end.
    expect(result.responses).toBeGreaterThan(20);
    expect(result.responses).toBeLessThan(45);
    expect(result.waitingOverSecond).toBe(1);
    expect(result.p99AnsweredMs).toBeLessThan(1_000);
    expect(result.p99Ms).toBeGreaterThan(1_500);
    expect(result.p50Ms).toBeLessThan(1_000);
    // Throughput is of answers only.
    expect(result.rps).toBeCloseTo(result.responses / result.seconds, 5);
  }, 10_000);
});
