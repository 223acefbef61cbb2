// Several listening sockets on the gateway's one port (SO_REUSEPORT), each handing its connections to the one HTTP
// server, so that a busy gateway still takes new connections in promptly; and closing them together.
import { lookup } from 'node:dns/promises';
import { Server as HttpServer, type Server } from 'node:http';
import {
  createServer as createNetServer,
  isIP,
  type Server as NetServer,
  type ServerOpts,
  type Socket,
} from 'node:net';

/**
 * Linux only: Node's `reusePort`, and the abstract unix socket that holds the port for this process (elsewhere the
 * gateway listens on one socket, as before).
 */
const SPREAD_PLATFORMS: ReadonlySet<NodeJS.Platform> = new Set(['linux']);

export interface ListenOptions {
  readonly host: string;
  readonly port: number;
  readonly backlog?: number;
  /** SERVER_ACCEPT_SOCKETS: listening sockets on the port (1: one, no SO_REUSEPORT). */
  readonly acceptSockets: number;
}

/** The server listening; `extra` are the other sockets on its port and `lock` what holds it: closed with it. */
export interface Listening {
  readonly extra: readonly NetServer[];
  readonly lock?: NetServer;
}

const ONE_SOCKET: Listening = { extra: [] };

/**
 * Node accepts one connection per event-loop turn (libuv since 1.45, 2022). Under load one turn serves hundreds of
 * sockets, so a burst of new connections waits in the kernel's queue, seconds long, while the connections already
 * in are served again and again (measured: 200-350 of 1,000 callers not answered once in a 5 s run; bench/README.md,
 * 2026-11-27, seventh). `acceptSockets` sockets bound to one port with SO_REUSEPORT accept up to that many
 * connections per turn: the kernel spreads new connections over them, and each hands its own to `server`, whose
 * timeouts, connection list and drain cover them all.
 */
export async function listenSpread(server: Server, options: ListenOptions): Promise<Listening> {
  const { backlog } = options;
  const spread = options.acceptSockets > 1 && SPREAD_PLATFORMS.has(process.platform);
  if (!spread) {
    await listenOn(server, { host: options.host, port: options.port, backlog });
    return ONE_SOCKET;
  }
  // A name is looked up once: every socket binds the same address (a rotating DNS answer would split them).
  const host = isIP(options.host) ? options.host : (await lookup(options.host)).address;
  // With SO_REUSEPORT a second gateway started on the same port by the same user would share it without a word: a
  // plain bind first fails there (EADDRINUSE) as it does without the extra sockets, and picks the port when it is 0;
  // the lock then keeps a second gateway starting in the same instant from passing the same check.
  const port = await claimPort(host, options.port);
  const lock = await holdPort(host, port);
  const extra: NetServer[] = [];
  try {
    await listenOn(server, { host, port, backlog, reusePort: true });
    const accepted = acceptedSocketOptions(server);
    for (let i = 1; i < options.acceptSockets; i += 1) {
      const acceptor = createNetServer(accepted, (socket) => server.emit('connection', socket));
      await listenOn(acceptor, { host, port, backlog, reusePort: true });
      extra.push(acceptor);
    }
  } catch (error) {
    for (const socket of [...extra, server, lock]) if (socket.listening) socket.close();
    throw error;
  }
  return { extra, lock };
}

/**
 * What a listening socket passes on to each connection it accepts: an extra socket gives its connections those of
 * the HTTP server (without them ~15 of 16 callers lost TCP_NODELAY, and a streamed answer's second piece waited ~40 ms
 * for the caller's delayed ACK). `maxConnections`, `blockList` and the 'drop' event are checked by the socket that
 * accepts: the gateway uses none of them.
 */
function acceptedSocketOptions(server: NetServer): ServerOpts {
  const own = server as NetServer & ServerOpts;
  return {
    allowHalfOpen: own.allowHalfOpen,
    noDelay: own.noDelay,
    keepAlive: own.keepAlive,
    keepAliveInitialDelay: own.keepAliveInitialDelay,
    highWaterMark: own.highWaterMark,
  };
}

/**
 * Stops accepting, lets in-flight requests finish, and cuts what is left after `timeoutMs`. A keep-alive
 * connection whose request was in flight turns idle when it is answered: it is closed then, not after the
 * keep-alive timeout, so the drain ends as soon as the last answer is out.
 */
export function closeServer(
  server: Server,
  timeoutMs: number,
  listening: Listening = ONE_SOCKET,
): Promise<void> {
  // Every listening socket stops accepting at once; each one's close ends when the connections it accepted are gone
  // (the HTTP server tracks them all for its timeouts, sweeps and deadline, but counts only its own for close).
  // Node's `close()` sweeps idle connections itself, with its own sweep: it runs this one instead.
  server.closeIdleConnections = idleConnectionSweep(server);
  const sockets: NetServer[] = [server, ...listening.extra];
  if (listening.lock) sockets.push(listening.lock);
  const closed = sockets.map((socket) => new Promise((resolve) => socket.close(resolve)));
  const deadline = setTimeout(() => server.closeAllConnections(), timeoutMs);
  deadline.unref();
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  sweep.unref();
  return Promise.all(closed).then(() => {
    clearTimeout(deadline);
    clearInterval(sweep);
  });
}

/** What Node keeps of an accepted connection: its socket, and on it the answer being written (null between them). */
interface TrackedConnection {
  readonly socket: Socket & { readonly _httpMessage?: object | null };
}

/**
 * Closes the server's idle keep-alive connections, leaving alone those still writing an answer. Node's own
 * `closeIdleConnections()` also destroys a connection whose answer has ended but is still being flushed to a slow
 * reader, cutting a large answer short (in the test, 3.9 of 16 MiB arrived); Node detaches the answer from its socket
 * only once every byte is handed to the kernel. It reads the connection list Node keeps under a private symbol (found
 * once); should a Node release move it, Node's own sweep runs instead (a test pins the list on the project's Node).
 */
function idleConnectionSweep(server: Server): () => void {
  const connections = connectionListOf(server);
  if (!connections) return HttpServer.prototype.closeIdleConnections.bind(server);
  return () => {
    for (const { socket } of connections.idle()) {
      if (socket._httpMessage || socket.writableLength > 0) continue;
      socket.destroy();
    }
  };
}

/** Node's list of the server's connections (what `closeIdleConnections()` reads), or undefined if it moved. */
export function connectionListOf(server: Server): { idle(): TrackedConnection[] } | undefined {
  const key = Object.getOwnPropertySymbols(server).find(
    (symbol) => symbol.description === 'http.server.connections',
  );
  const list = key === undefined ? undefined : (server as unknown as Record<symbol, unknown>)[key];
  return typeof (list as { idle?: unknown } | undefined)?.idle === 'function'
    ? (list as { idle(): TrackedConnection[] })
    : undefined;
}

/**
 * Holds `host`:`port` for this process while it listens: an abstract unix socket named after them, which a second
 * gateway cannot bind (EADDRINUSE) and the kernel frees when the process ends. Abstract names belong to the network
 * namespace, as ports do: gateways in containers of their own never meet here.
 */
async function holdPort(host: string, port: number): Promise<NetServer> {
  const lock = createNetServer((socket) => socket.destroy());
  await listenOn(lock, { path: `\0payments-bff-gateway:${host}:${port}` });
  return lock;
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
  options: { host?: string; port?: number; path?: string; backlog?: number; reusePort?: boolean },
): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
