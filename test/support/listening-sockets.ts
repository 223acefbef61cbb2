// What the kernel says of a gateway's listening sockets (`ss`), and gateways started for a test file, closed after it.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { startTestGateway, type TestGateway } from './in-process-gateway';

/** The backlogs of the sockets listening on the port of `url`, one per socket (a socket's Send-Q is its backlog). */
export function listeningBacklogs(url: string): number[] {
  const { port } = new URL(url);
  const out = execFileSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' }).trim();
  return out
    .split('\n')
    .filter((line) => line.startsWith('LISTEN'))
    .map((line) => Number(line.split(/\s+/)[2]));
}

/** Linux caps every backlog at net.core.somaxconn. */
export const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8').trim());

/** Starts in-process gateways with `env`, every one closed after the test file (call at the top of the file). */
export function gatewaysForFile(): (env: Record<string, string>) => Promise<TestGateway> {
  const gateways: TestGateway[] = [];
  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
  });
  return async (env) => {
    const gw = await startTestGateway(env);
    gateways.push(gw);
    return gw;
  };
}
