import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net';
import { GatewayError } from '../../../src/http/gateway-error';
import { createTokenClient, retryAfterSeconds } from '../../../src/tokens/internal/token-client';
import { createTestPki } from '../../support/test-certificates';

const CREDENTIALS = { username: 'merchant-user', password: 'hunter2-password' };

function answering(status: number, body: unknown): typeof fetch {
  return (async () => new Response(JSON.stringify(body), { status })) as typeof fetch;
}

async function failure(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(GatewayError);
    return error as GatewayError;
  }
  throw new Error('expected a rejection');
}

describe('token client', () => {
  it('carries a 429 Retry-After (seconds or HTTP date) on the error for the back-off; never on a 5xx', async () => {
    const answer = (status: number, retryAfter?: string) =>
      (async () =>
        new Response('{}', {
          status,
          headers: retryAfter ? { 'retry-after': retryAfter } : {},
        })) as unknown as typeof fetch;
    const login = (fake: typeof fetch) =>
      failure(
        createTokenClient({ baseUrl: 'https://up.test', timeoutMs: 1000, fetch: fake }).login(CREDENTIALS),
      );
    const limited = await login(answer(429, '120'));
    expect(limited.reason).toBe('UPSTREAM_UNAVAILABLE');
    expect(limited.headers['Retry-After']).toBe('120');
    expect((await login(answer(429, 'soon'))).headers['Retry-After']).toBeUndefined();
    expect((await login(answer(503, '120'))).headers['Retry-After']).toBeUndefined();
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterSeconds('Thu, 01 Jan 2026 00:01:30 GMT', now)).toBe(90);
    expect(retryAfterSeconds('Wed, 31 Dec 2025 00:00:00 GMT', now)).toBe(0);
    expect(retryAfterSeconds(null, now)).toBe(0);
  });

  it('logs in and refreshes with JSON bodies on the two endpoints', async () => {
    const seen: { url: string; body: unknown; headers: Headers }[] = [];
    const fake = (async (url: string, init: RequestInit) => {
      seen.push({ url, body: JSON.parse(init.body as string), headers: new Headers(init.headers) });
      return new Response(JSON.stringify({ access: 'A', refresh: 'R' }), { status: 200 });
    }) as unknown as typeof fetch;
    const client = createTokenClient({
      baseUrl: 'https://up.test',
      timeoutMs: 1000,
      fetch: fake,
      headers: { 'x-version': 'LPV3' },
    });
    await expect(client.login(CREDENTIALS)).resolves.toEqual({ access: 'A', refresh: 'R' });
    await expect(client.refresh('R')).resolves.toEqual({ access: 'A', refresh: 'R' });
    expect(seen.map((s) => s.url)).toEqual([
      'https://up.test/api/token/',
      'https://up.test/api/token/refresh/',
    ]);
    expect(seen[0].body).toEqual(CREDENTIALS);
    expect(seen[1].body).toEqual({ refresh: 'R' });
    expect(seen[0].headers.get('x-version')).toBe('LPV3');
  });

  it('answers a refresh without a rotated refresh token', async () => {
    const client = createTokenClient({
      baseUrl: 'https://up.test',
      timeoutMs: 1000,
      fetch: answering(200, { access: 'A' }),
    });
    await expect(client.refresh('R')).resolves.toEqual({ access: 'A' });
  });

  it.each([
    [401, { detail: 'No active account found with the given credentials' }, 'UPSTREAM_AUTH_FAILED'],
    [403, { detail: 'forbidden' }, 'UPSTREAM_IP_NOT_WHITELISTED'],
    [500, { detail: 'boom' }, 'UPSTREAM_UNAVAILABLE'],
    [503, 'not json', 'UPSTREAM_UNAVAILABLE'],
    [200, { nothing: true }, 'UPSTREAM_UNAVAILABLE'],
  ])('maps HTTP %i to %s without echoing a credential', async (status, body, reason) => {
    const client = createTokenClient({
      baseUrl: 'https://up.test',
      timeoutMs: 1000,
      fetch: answering(status, body),
    });
    const error = await failure(client.login(CREDENTIALS));
    expect(error.reason).toBe(reason);
    const text = `${error.message} ${error.detail} ${JSON.stringify(error)}`;
    expect(text).not.toContain(CREDENTIALS.username);
    expect(text).not.toContain(CREDENTIALS.password);
  });

  it('maps a refused refresh token to UPSTREAM_AUTH_FAILED without echoing it', async () => {
    const client = createTokenClient({
      baseUrl: 'https://up.test',
      timeoutMs: 1000,
      fetch: answering(401, { detail: 'Token is invalid or expired', code: 'token_not_valid' }),
    });
    const error = await failure(client.refresh('secret-refresh-token'));
    expect(error.reason).toBe('UPSTREAM_AUTH_FAILED');
    expect(error.message).not.toContain('secret-refresh-token');
  });

  describe('against a real socket', () => {
    let server: Server;
    let url: string;
    beforeAll(async () => {
      // Never answers: the client must give up on its own.
      server = createServer(() => undefined);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    it('times out as UPSTREAM_TIMEOUT', async () => {
      const client = createTokenClient({ baseUrl: url, timeoutMs: 150 });
      const started = Date.now();
      expect((await failure(client.login(CREDENTIALS))).reason).toBe('UPSTREAM_TIMEOUT');
      expect(Date.now() - started).toBeLessThan(2000);
    });

    // Liveness, not speed: before its connect was bounded, close() waited out undici's own 10 s connect timeout.
    it('with UPSTREAM_CA_FILE, gives up a TLS handshake that stalls, and close() then returns (its own pool)', async () => {
      // Accepts the connection and never answers the ClientHello.
      const stalled: Socket[] = [];
      const tcp = createTcpServer((socket) => stalled.push(socket));
      await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
      const client = createTokenClient({
        baseUrl: `https://127.0.0.1:${(tcp.address() as AddressInfo).port}`,
        timeoutMs: 200,
        extraCa: [(await createTestPki()).caPem],
      });
      try {
        expect((await failure(client.login(CREDENTIALS))).reason).toBe('UPSTREAM_TIMEOUT');
        expect(stalled).toHaveLength(1);
        await expect(client.close?.()).resolves.toBeUndefined();
      } finally {
        for (const socket of stalled) socket.destroy();
        await new Promise((resolve) => tcp.close(resolve));
      }
    }, 6000);

    it('maps a refused connection to UPSTREAM_UNAVAILABLE', async () => {
      const client = createTokenClient({ baseUrl: 'http://127.0.0.1:1', timeoutMs: 1000 });
      expect((await failure(client.login(CREDENTIALS))).reason).toBe('UPSTREAM_UNAVAILABLE');
    });
  });
});
