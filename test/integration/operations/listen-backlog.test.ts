// SERVER_LISTEN_BACKLOG: the queue the kernel keeps for the gateway's not-yet-accepted connections, read back from the
// kernel itself (`ss`: a listening socket's Send-Q is its backlog). Node's default (511) let a burst of 1,000 new
// connections overflow it: the overflowing callers waited 1 s, 3 s or 7 s for the kernel's retransmission.
import { DEFAULT_SERVER_LISTEN_BACKLOG } from '../../../src/config/env-schema';
import { gatewaysForFile, listeningBacklogs, somaxconn } from '../../support/listening-sockets';

const gatewayWith = gatewaysForFile();

/** The backlog of the gateway's first listening socket (each of its sockets has the same). */
const kernelBacklog = (url: string) => listeningBacklogs(url)[0];

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
