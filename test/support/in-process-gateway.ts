// Starts the real gateway (startGateway) in this process against a given upstream, capturing its logs.
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config/load-config';
import { type RunningGateway, startGateway } from '../../src/gateway';
import { localSessions, startLocalUpstream } from '../../src/local-mode';

export interface TestGateway {
  readonly url: string;
  readonly gateway: RunningGateway;
  /** Every log line written so far. */
  logs(): string;
  close(): Promise<void>;
}

export async function startTestGateway(env: Record<string, string>): Promise<TestGateway> {
  const lines: string[] = [];
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  // NODE_ENV=test: an upstream with NODE_ENV unset is production, which refuses the plain-http simulator.
  const config = loadConfig({ HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', NODE_ENV: 'test', ...env });
  // As main.ts does: local mode's upstream is the bundled simulator, started outside startGateway.
  const local = config.mode === 'local';
  const gateway = await startGateway(config, {
    logStream,
    localUpstream: local ? await startLocalUpstream() : undefined,
    localSessions: local ? localSessions() : undefined,
  });
  return {
    url: gateway.url,
    gateway,
    logs: () => lines.join(''),
    close: () => gateway.shutdown(),
  };
}
