// Starts a real redis-server on an ephemeral loopback port for one test file, and can kill, pause or restart it.
import { type ChildProcess, spawn } from 'node:child_process';
import { createConnection } from 'node:net';
import { freePort, waitFor } from './ports';
import { tempDir } from './temp-dir';

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Stops the process abruptly (SIGKILL): a crash, as seen by clients. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty: it keeps nothing on disk). */
  restart(): Promise<void>;
  /** SIGSTOP / SIGCONT: a hung server that keeps its connections open. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/** A throwaway redis-server on loopback: nothing persisted, files (if any) in `dir`. */
export function redisServerArgs(port: number, dir: string): string[] {
  return ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
}

/** True when a Redis server answers PING on the loopback port. */
export function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let answer = '';
    socket.setTimeout(500, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      answer += chunk.toString();
      if (answer.includes('\r\n')) {
        socket.destroy();
        resolve(answer.startsWith('+PONG'));
      }
    });
    socket.on('error', () => resolve(false));
  });
}

export async function startRedisServer(extraArgs: string[] = []): Promise<RedisServer> {
  const port = await freePort();
  const dir = tempDir('bff-redis-');
  let child: ChildProcess | undefined;

  const launch = async () => {
    child = spawn('redis-server', [...redisServerArgs(port, dir), ...extraArgs], { stdio: 'ignore' });
    await waitFor(() => redisPing(port), { what: `redis-server on port ${port}` });
  };
  const kill = async () => {
    const current = child;
    child = undefined;
    if (!current || current.exitCode !== null) return;
    const exited = new Promise((r) => current.once('exit', r));
    current.kill('SIGCONT');
    current.kill('SIGKILL');
    await exited;
  };

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    restart: launch,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    stop: kill,
  };
}
