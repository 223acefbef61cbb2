// Loopback servers a test starts and closes, and raw HTTP exchanges with them (bytes in, the answer's bytes out).
import type { Server } from 'node:http';
import { connect } from 'node:net';

/** The servers a test file starts; each is closed after every test, its kept-alive connections with it. */
export function serversClosedAfterEach(): Server[] {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(
      servers.splice(0).map(
        (server) =>
          new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      ),
    );
  });
  return servers;
}

/**
 * Writes `chunks` on a new connection to 127.0.0.1:`port` and resolves with everything read (latin1) until the server
 * closes the connection or stays quiet for `quietMs`; a reset ends it too.
 */
export function rawExchange(port: number, chunks: string | string[], quietMs = 300): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(text);
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(done, quietMs);
    };
    socket.setEncoding('latin1');
    socket.on('data', (data: string) => {
      text += data;
      arm();
    });
    socket.on('close', done);
    socket.on('error', (error: NodeJS.ErrnoException) =>
      error.code === 'ECONNRESET' ? done() : reject(error),
    );
    socket.on('connect', () => {
      for (const chunk of typeof chunks === 'string' ? [chunks] : chunks) socket.write(chunk);
      arm();
    });
  });
}
