// SERVER_ACCEPT_SOCKETS: the gateway listens on several sockets of one port (SO_REUSEPORT), since Node accepts one
// connection per event-loop turn on each. Read back from the kernel (`ss`), against a second gateway started on the
// same port, and through a drain whose in-flight requests came in on every socket.
import { DEFAULT_SERVER_ACCEPT_SOCKETS } from '../../../src/config/env-schema';
import { loadConfig } from '../../../src/config/load-config';
import { startGateway } from '../../../src/gateway';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { startTestGateway } from '../../support/in-process-gateway';
import { gatewaysForFile, listeningBacklogs, somaxconn } from '../../support/listening-sockets';
import { API_KEY, captureLogs, gatewayEnv, PASSWORD, PLAN_ID, USERNAME } from '../../support/ops-fixture';

const gatewayWith = gatewaysForFile();

describe('SERVER_ACCEPT_SOCKETS', () => {
  test('by default the gateway listens on 16 sockets of its port, each with the configured backlog', async () => {
    expect(DEFAULT_SERVER_ACCEPT_SOCKETS).toBe(16);
    const gw = await gatewayWith({ SERVER_LISTEN_BACKLOG: '1500' });
    expect(listeningBacklogs(gw.url)).toEqual(Array(16).fill(Math.min(1500, somaxconn)));
  });

  test('1 listens on one socket, as Node does by default', async () => {
    const gw = await gatewayWith({ SERVER_ACCEPT_SOCKETS: '1' });
    expect(listeningBacklogs(gw.url)).toEqual([Math.min(4096, somaxconn)]);
  });

  test('a second gateway on a port the first holds is refused (EADDRINUSE), not let in to share it, and takes nothing', async () => {
    const first = await gatewayWith({});
    const { port } = new URL(first.url);
    for (const acceptSockets of ['16', '1'])
      await expect(startTestGateway({ PORT: port, SERVER_ACCEPT_SOCKETS: acceptSockets })).rejects.toThrow(
        /EADDRINUSE/,
      );
    expect(listeningBacklogs(first.url)).toHaveLength(16);
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
  });
});

describe('connections taken in on every socket', () => {
  let simulator: RunningSimulator;

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  });
  afterAll(async () => {
    await simulator?.close();
  });

  test('64 callers at once are all answered, and a drain lets each of 32 requests in flight finish with 200', async () => {
    const gateway = await startGateway(loadConfig(gatewayEnv(simulator.url)), {
      logStream: captureLogs().stream,
    });
    try {
      const plan = () =>
        fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, { headers: { 'x-api-key': API_KEY } });
      // 64 connections of distinct source ports: the kernel spreads them over the 16 sockets.
      const first = await Promise.all(Array.from({ length: 64 }, plan));
      expect(first.map((r) => r.status)).toEqual(Array(64).fill(200));
      await Promise.all(first.map((r) => r.arrayBuffer()));

      simulator.setFaults({ latencyMs: 800 });
      const inFlight = Array.from({ length: 32 }, plan);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const order: string[] = [];
      const stopped = gateway.shutdown().then(() => order.push('stopped'));
      const answered = (response: Response) => {
        order.push('answer');
        return response;
      };
      const answers = await Promise.all(inFlight.map((p) => p.then(answered)));
      expect(answers.map((r) => r.status)).toEqual(Array(32).fill(200));
      await stopped;
      // The drain waited for the requests of every socket, not only for those of the first one.
      expect(order.indexOf('stopped')).toBe(32);
      // Nothing listens any more: no socket of the 16 is left behind.
      expect(listeningBacklogs(gateway.url)).toEqual([]);
    } finally {
      simulator.setFaults({});
      await gateway.shutdown();
    }
  });
});
