// SERVER_LISTEN_BACKLOG: the queue the kernel keeps for the gateway's not-yet-accepted connections, read back from the
// kernel itself (`ss`: a listening socket's Send-Q is its backlog). Node's default (511) let a burst of 1,000 new
// connections overflow it: the overflowing callers waited 1 s, 3 s or 7 s for the kernel's retransmission.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { DEFAULT_SERVER_LISTEN_BACKLOG } from '../../../src/config/env-schema';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

/** The backlog of the socket listening on 127.0.0.1:`port`, as the kernel reports it. */
function kernelBacklog(url: string): number {
  const { port } = new URL(url);
  const out = execFileSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' }).trim();
  const [state, , sendQ] = out.split(/\s+/);
  if (state !== 'LISTEN') throw new Error(`no listening socket on port ${port}: ${out}`);
  return Number(sendQ);
}

/** Linux caps every backlog at net.core.somaxconn. */
const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8').trim());

const gateways: TestGateway[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((gw) => gw.close()));
});

async function gatewayWith(env: Record<string, string>): Promise<TestGateway> {
  const gw = await startTestGateway(env);
  gateways.push(gw);
  return gw;
}

describe('SERVER_LISTEN_BACKLOG', () => {
  test('by default the gateway listens with a backlog of 4096 (or the kernel cap, net.core.somaxconn), not Node’s 511', async () => {
    const gw = await gatewayWith({});
    expect(DEFAULT_SERVER_LISTEN_BACKLOG).toBe(4096);
    expect(kernelBacklog(gw.url)).toBe(Math.min(DEFAULT_SERVER_LISTEN_BACKLOG, somaxconn));
  });

  test('the configured backlog is the one the kernel keeps', async () => {
    const gw = await gatewayWith({ SERVER_LISTEN_BACKLOG: '1500' });
    expect(kernelBacklog(gw.url)).toBe(Math.min(1500, somaxconn));
  });
});
