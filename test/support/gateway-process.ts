// Spawns real gateway processes (src/main.ts through tsx) for multi-replica and signal tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { freePort, waitFor } from './ports';

const ROOT = resolve(__dirname, '..', '..');

export interface GatewayProcess {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far (its JSON logs included). */
  logs(): string;
  /** Sends `signal` (SIGTERM by default) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  readonly exited: Promise<number | null>;
}

export interface GatewayProcessOptions {
  /**
   * Gateway environment; PORT and HOST are chosen here. The parent's environment is NOT inherited. NODE_ENV is
   * `test` unless given (an upstream with NODE_ENV unset is production); `NODE_ENV: ''` leaves it unset.
   */
  readonly env: Record<string, string>;
  /** Wait until /readyz answers 200 (default) or only until the port serves /healthz. */
  readonly waitUntil?: 'ready' | 'live';
  readonly startTimeoutMs?: number;
  /** Headers of the start-up probe: an X-Forwarded-For the INBOUND_ALLOW_CIDRS admits, behind TRUST_PROXY. */
  readonly probeHeaders?: Record<string, string>;
}

/** Test defaults: quiet JSON logs at info, loopback only. */
export async function startGatewayProcess(options: GatewayProcessOptions): Promise<GatewayProcess> {
  // A test that must know the port before start (a provider's redirect URIs) passes PORT itself.
  const port = options.env.PORT ? Number(options.env.PORT) : await freePort();
  let output = '';
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      NODE_ENV: 'test',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  const url = `http://127.0.0.1:${port}`;
  let exitedEarly = false;
  void exited.then(() => {
    exitedEarly = true;
  });
  const path = options.waitUntil === 'live' ? '/healthz' : '/readyz';
  try {
    // A process that exits during start-up (a refused configuration) ends the wait at once, not at its timeout.
    await waitFor(
      async () => exitedEarly || (await fetch(url + path, { headers: options.probeHeaders })).status === 200,
      {
        timeoutMs: options.startTimeoutMs ?? 20_000,
        what: `gateway on ${url}`,
        intervalMs: 50,
      },
    );
    if (exitedEarly) throw new Error('gateway exited during start-up');
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`${(error as Error).message}\n--- gateway output ---\n${output}`);
  }
  return {
    url,
    port,
    child,
    logs: () => output,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
