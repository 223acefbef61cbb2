// Several listening sockets on the gateway's one port (SO_REUSEPORT), each handing its connections to the one HTTP
// server, so that a busy gateway still takes new connections in promptly; and closing them together.
import type { Server } from 'node:http';
import { createServer as createNetServer, type Server as NetServer } from 'node:net';

/** Where Node offers `reusePort` (elsewhere the gateway listens on one socket, as before). */
const REUSE_PORT_PLATFORMS: ReadonlySet<NodeJS.Platform> = new Set(['linux', 'freebsd']);

export interface ListenOptions {
  readonly host: string;
  readonly port: number;
  readonly backlog?: number;
  /** SERVER_ACCEPT_SOCKETS: listening sockets on the port (1: one, no SO_REUSEPORT). */
  readonly acceptSockets: number;
}

/** The server listening; `extra` are the other sockets on its port, to be closed with it. */
export interface Listening {
  readonly extra: readonly NetServer[];
}

/**
 * Node accepts one connection per event-loop turn (libuv since 1.45, 2022). Under load one turn serves hundreds of
 * sockets, so a burst of new connections waits in the kernel's queue, seconds long, while the connections already
 * in are served again and again (measured: 200-350 of 1,000 callers not answered once in a 5 s run; bench/README.md,
 * 2026-11-27, seventh). `acceptSockets` sockets bound to one port with SO_REUSEPORT accept up to that many
 * connections per turn: the kernel spreads new connections over them, and each hands its own to `server`, whose
 * timeouts, connection list and drain cover them all.
 */
export async function listenSpread(server: Server, options: ListenOptions): Promise<Listening> {
  const { host, backlog } = options;
  const spread = options.acceptSockets > 1 && REUSE_PORT_PLATFORMS.has(process.platform);
  if (!spread) {
    await listenOn(server, { host, port: options.port, backlog });
    return { extra: [] };
  }
  // With SO_REUSEPORT a second gateway started on the same port by the same user would share it without a word: a
  // plain bind first fails there (EADDRINUSE) as it does without the extra sockets, and picks the port when it is 0.
  const port = await claimPort(host, options.port);
  await listenOn(server, { host, port, backlog, reusePort: true });
  const extra: NetServer[] = [];
  try {
    for (let i = 1; i < options.acceptSockets; i += 1) {
      const acceptor = createNetServer((socket) => server.emit('connection', socket));
      await listenOn(acceptor, { host, port, backlog, reusePort: true });
      extra.push(acceptor);
    }
  } catch (error) {
    for (const acceptor of extra) acceptor.close();
    server.close();
    throw error;
  }
  return { extra };
}

/**
 * Stops accepting, lets in-flight requests finish, and cuts what is left after `timeoutMs`. A keep-alive
 * connection whose request was in flight turns idle when it is answered: it is closed then, not after the
 * keep-alive timeout, so the drain ends as soon as the last answer is out.
 */
export function closeServer(
  server: Server,
  timeoutMs: number,
  extra: readonly NetServer[] = [],
): Promise<void> {
  // Every listening socket stops accepting at once; each one's close ends when the connections it accepted are gone
  // (the HTTP server tracks them all for its timeouts, sweeps and deadline, but counts only its own for close).
  const closed = [server, ...extra].map((listening) => new Promise((resolve) => listening.close(resolve)));
  const deadline = setTimeout(() => server.closeAllConnections(), timeoutMs);
  deadline.unref();
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  sweep.unref();
  server.closeIdleConnections();
  return Promise.all(closed).then(() => {
    clearTimeout(deadline);
    clearInterval(sweep);
  });
}

/** The port free for this process: bound without SO_REUSEPORT, then let go at once. */
async function claimPort(host: string, port: number): Promise<number> {
  const probe = createNetServer();
  await listenOn(probe, { host, port });
  const claimed = (probe.address() as { port: number }).port;
  await new Promise((resolve) => probe.close(resolve));
  return claimed;
}

function listenOn(
  server: NetServer,
  options: { host: string; port: number; backlog?: number; reusePort?: boolean },
): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
