// The doctor loads the client registry exactly as the gateway would, production refusals included.
import { randomBytes } from 'node:crypto';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { loadConfig } from '../../../src/config/load-config';
import { checkClientRegistry, requestUpstreamToken } from '../../../src/operations/doctor-checks';
import { startSimulator } from '../../../src/simulator/simulator';

const LOCAL_REGISTRY = resolve(__dirname, '../../../config/clients.local.json');
const upstream = {
  UPSTREAM_BASE_URL: 'https://api.payments.example.com',
  UPSTREAM_USERNAME: 'merchant',
  UPSTREAM_PASSWORD: 'secret-password',
  CLIENTS_FILE: LOCAL_REGISTRY,
};

describe('checkClientRegistry', () => {
  it('fails in production on a registry holding the development key, as the gateway refuses to start', () => {
    const config = loadConfig({
      ...upstream,
      NODE_ENV: 'production',
      REDIS_URL: 'rediss://redis:6380',
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      METRICS_PORT: '9464',
    });
    const check = checkClientRegistry(config);
    expect(check).toMatchObject({ kind: 'invalid', file: LOCAL_REGISTRY });
    expect(JSON.stringify(check)).toMatch(/development key/);
    expect(JSON.stringify(check)).not.toContain('local-dev-key');
  });

  it('loads the same registry outside production', () => {
    const config = loadConfig({ ...upstream, NODE_ENV: 'development' });
    expect(checkClientRegistry(config)).toEqual({ kind: 'loaded', file: LOCAL_REGISTRY, clients: 2 });
  });
});

describe('requestUpstreamToken', () => {
  /** Trickles a header line every 50 ms, never idle for long, and only then answers a token pair. */
  const TRICKLED_LINES = 60;

  it('asks the URL the gateway logs in at: a path in UPSTREAM_BASE_URL is kept, as the token client keeps it', async () => {
    const upstream = await startSimulator({ port: 0, username: 'merchant', password: 'secret-password' });
    try {
      // The gateway would POST <base>/payments/api/token/ and get 404: the doctor must not pass on /api/token/.
      const attempt = await requestUpstreamToken(
        { baseUrl: `${upstream.url}/payments`, username: 'merchant', password: 'secret-password' },
        { timeoutMs: 5_000 },
      );
      expect(attempt).toMatchObject({
        kind: 'answer',
        target: `${upstream.url}/payments`,
        status: 404,
        tokenIssued: false,
      });
      expect(upstream.stats().logins).toBe(0);
    } finally {
      await upstream.close();
    }
  });

  it('gives up after timeoutMs in all, not after timeoutMs of silence: an upstream trickling bytes cannot hold it', async () => {
    const sockets = new Set<Socket>();
    const upstream = createServer((socket) => {
      sockets.add(socket);
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\n');
        let sent = 0;
        const trickle = setInterval(() => {
          sent += 1;
          if (socket.destroyed) clearInterval(trickle);
          else if (sent <= TRICKLED_LINES) socket.write(`x-line-${sent}: 1\r\n`);
          else {
            clearInterval(trickle);
            const body = '{"access":"a.b.c","refresh":"d.e.f"}';
            socket.end(`content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
          }
        }, 50);
      });
    });
    await new Promise<void>((done) => upstream.listen(0, '127.0.0.1', done));
    try {
      const { port } = upstream.address() as AddressInfo;
      const attempt = await requestUpstreamToken(
        { baseUrl: `http://127.0.0.1:${port}`, username: 'merchant', password: 'secret-password' },
        { timeoutMs: 500 },
      );
      expect(attempt).toMatchObject({ kind: 'error', timedOut: true, timeoutMs: 500 });
    } finally {
      for (const socket of sockets) socket.destroy();
      upstream.close();
    }
  });
});
