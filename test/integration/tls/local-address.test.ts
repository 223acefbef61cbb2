// `localAddress` on real loopback sockets: the token client and the forwarder's agent bind every socket to the
// account's egress address. The simulator's IP allow-list admits 127.0.0.2 only and its logs name the TCP peer, so
// a client bound to 127.0.0.2 is answered, one bound to 127.0.0.3 is refused 403, and an address this host does not
// hold is a clear logged failure (502/503 to the caller, as any connection error), never a crash.
import type { Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { pino } from 'pino';
import {
  createForwarder,
  createUpstreamAgent,
  createUpstreamCircuits,
  createUpstreamPool,
  createUpstreamSlots,
  sendAnswer,
} from '../../../src/forwarding';
import { errorEnvelopeHandler } from '../../../src/http/error-envelope';
import { createMetrics } from '../../../src/observability/metrics';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { createMemoryTokenStore } from '../../../src/store/memory-token-store';
import {
  createRecordSeal,
  createTokenCipher,
  createTokenClient,
  createTokenManager,
  staticCredentialSource,
  type TokenProvider,
} from '../../../src/tokens';
import { captureLogs } from '../../support/ops-fixture';
import { createTestPki } from '../../support/test-certificates';

const USERNAME = 'egress-merchant';
const PASSWORD = 'egress-Passw0rd-value';
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const ALLOWED = '127.0.0.2';
const OTHER = '127.0.0.3';
/** TEST-NET-1 (RFC 5737): never an address of this host. */
const NOT_HELD = '192.0.2.10';

let simulator: RunningSimulator;
const closers: Array<() => unknown> = [];

beforeAll(async () => {
  simulator = await startSimulator({
    port: 0,
    username: USERNAME,
    password: PASSWORD,
    allowedIps: [ALLOWED],
  });
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  await simulator?.close();
});
beforeEach(() => simulator.reset());

function tokenClient(localAddress: string | undefined) {
  const client = createTokenClient({ baseUrl: simulator.url, timeoutMs: 3_000, localAddress });
  closers.push(() => client.close?.());
  return client;
}

/** The real token manager (memory store) over a token client bound to `localAddress`. */
function tokenManager(localAddress: string | undefined, logger = pino({ enabled: false })): TokenProvider {
  const metrics = createMetrics();
  const manager = createTokenManager({
    store: createMemoryTokenStore(),
    client: tokenClient(localAddress),
    credentials: staticCredentialSource(USERNAME, PASSWORD),
    logger,
    metrics,
    seal: createRecordSeal(createTokenCipher(undefined), metrics.storeRecordsRejected),
    settings: {
      upstreamBaseUrl: simulator.url,
      refreshSkewSeconds: 60,
      lockTtlMs: 2_000,
      lockWaitMs: 500,
      loginMinIntervalMs: 1_000,
      keyPrefix: 'egress-test:',
    },
  });
  closers.push(() => manager.stop());
  return manager;
}

/** A gateway-shaped app: GET /plan forwards a plan read through a pool bound to `localAddress`. */
async function forwardingApp(
  localAddress: string | undefined,
  tokens: TokenProvider,
  logger = pino({ enabled: false }),
): Promise<string> {
  const pool = createUpstreamPool(simulator.url, { connections: 8, localAddress, connectTimeoutMs: 3_000 });
  closers.push(() => pool.destroy());
  const forwarder = createForwarder({
    baseUrl: simulator.url,
    pool,
    slots: createUpstreamSlots({ limit: 8, queueTimeoutMs: 1_000 }),
    tokens,
    circuits: createUpstreamCircuits(['plan'], {
      failureRatio: 0.5,
      windowMs: 10_000,
      minimumCalls: 100,
      resetMs: 1_000,
    }),
    timeoutMs: 3_000,
    staticHeaders: {},
    metrics: createMetrics(),
    logger,
  });
  const app = express();
  app.get('/plan', async (req, res, next) => {
    req.id = 'egress-test';
    try {
      sendAnswer(
        res,
        await forwarder.forward(req, res, {
          route: 'plan',
          method: 'GET',
          path: `/api/subscriptions/plan/${PLAN_ID}`,
        }),
      );
    } catch (error) {
      next(error);
    }
  });
  app.use(errorEnvelopeHandler());
  const server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/plan`;
}

describe('token calls bind to the account localAddress', () => {
  test('bound to the allowed address: the simulator sees that address and issues a pair', async () => {
    const answer = await tokenClient(ALLOWED).login({ username: USERNAME, password: PASSWORD });
    expect(answer.refresh).toEqual(expect.any(String));
    expect(simulator.receivedTokenRequests().map((r) => r.remoteAddress)).toEqual([ALLOWED]);
    expect(simulator.stats().logins).toBe(1);
  });

  test('bound to another address: refused 403 by the allow-list (UPSTREAM_IP_NOT_WHITELISTED)', async () => {
    await expect(tokenClient(OTHER).login({ username: USERNAME, password: PASSWORD })).rejects.toMatchObject({
      reason: 'UPSTREAM_IP_NOT_WHITELISTED',
    });
    expect(simulator.stats()).toMatchObject({ logins: 0, forbidden: 1 });
  });

  test('unbound (the host default, 127.0.0.1 toward loopback): refused too, so the binding above is what admitted', async () => {
    await expect(
      tokenClient(undefined).login({ username: USERNAME, password: PASSWORD }),
    ).rejects.toMatchObject({ reason: 'UPSTREAM_IP_NOT_WHITELISTED' });
  });

  test('an address the host does not hold: UPSTREAM_UNAVAILABLE naming localAddress, logged with the address', async () => {
    await expect(
      tokenClient(NOT_HELD).login({ username: USERNAME, password: PASSWORD }),
    ).rejects.toMatchObject({
      reason: 'UPSTREAM_UNAVAILABLE',
      detail: expect.stringContaining("does not hold the account's local address (localAddress)"),
    });
    // Through the token manager, the failure is logged with the address (callers get the short back-off's 502).
    const logs = captureLogs();
    const tokens = tokenManager(NOT_HELD, pino(logs.stream));
    await expect(tokens.getAccessToken()).rejects.toMatchObject({ reason: 'UPSTREAM_UNAVAILABLE' });
    const line = logs
      .text()
      .split('\n')
      .find((l) => l.includes('EADDRNOTAVAIL'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({
      event: 'token.login',
      code: 'EADDRNOTAVAIL',
      localAddress: NOT_HELD,
      msg: expect.stringContaining(`this host does not hold ${NOT_HELD}`),
    });
    expect(logs.text()).not.toContain(PASSWORD);
    expect(simulator.stats().requests).toBe(0);
  });

  test('a localAddress that is no IP address is refused when the client is built, not on a call', () => {
    expect(() =>
      createTokenClient({ baseUrl: simulator.url, timeoutMs: 1_000, localAddress: 'eth0' }),
    ).toThrow('localAddress must be an IPv4 or IPv6 address, got "eth0"');
    expect(() => createUpstreamAgent(simulator.url, 1, { localAddress: 'eth0' })).toThrow('localAddress');
    expect(() =>
      createUpstreamPool(simulator.url, { connections: 1, localAddress: 'eth0', connectTimeoutMs: 1_000 }),
    ).toThrow('localAddress');
  });
});

describe("over TLS with UPSTREAM_CA_FILE (the token client's own pool, the forwarder's pool and the https agent)", () => {
  test('both trust the CA and bind to the address: answered from the allowed address, refused from another', async () => {
    const pki = await createTestPki();
    const https = await startSimulator({
      port: 0,
      username: USERNAME,
      password: PASSWORD,
      allowedIps: [ALLOWED],
      tls: pki.good,
    });
    closers.push(() => https.close());
    const login = (localAddress: string) => {
      const client = createTokenClient({
        baseUrl: https.url,
        timeoutMs: 3_000,
        extraCa: [pki.caPem],
        localAddress,
      });
      closers.push(() => client.close?.());
      return client.login({ username: USERNAME, password: PASSWORD });
    };
    await expect(login(ALLOWED)).resolves.toMatchObject({ access: expect.any(String) });
    await expect(login(OTHER)).rejects.toMatchObject({ reason: 'UPSTREAM_IP_NOT_WHITELISTED' });
    expect(https.receivedTokenRequests().map((r) => r.remoteAddress)).toEqual([ALLOWED]);

    const agent = createUpstreamAgent(https.url, 2, { extraCa: [pki.caPem], localAddress: ALLOWED });
    closers.push(() => agent.destroy());
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpsRequest(`${https.url}/api/subscriptions/plan/${PLAN_ID}`, { agent }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    // Unauthenticated, so 401; what matters is that the allow-list let the socket of the address through.
    expect(status).toBe(401);
    expect(https.stats().forbidden).toBe(1);

    // The forwarder's pool: the same CA trusted, every socket bound to the account's address.
    const poolStatus = async (localAddress: string) => {
      const pool = createUpstreamPool(https.url, {
        connections: 2,
        extraCa: [pki.caPem],
        localAddress,
        connectTimeoutMs: 3_000,
      });
      closers.push(() => pool.destroy());
      const answer = await pool.request({ path: `/api/subscriptions/plan/${PLAN_ID}`, method: 'GET' });
      await answer.body.dump();
      return answer.statusCode;
    };
    expect(await poolStatus(ALLOWED)).toBe(401);
    expect(await poolStatus(OTHER)).toBe(403);
    expect(https.stats().forbidden).toBe(2);
  });
});

describe('forwarded calls bind to the account localAddress', () => {
  test('token and forwarded call both from the allowed address: 200, and the simulator saw only that address', async () => {
    const url = await forwardingApp(ALLOWED, tokenManager(ALLOWED));
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(simulator.receivedTokenRequests().map((r) => r.remoteAddress)).toEqual([ALLOWED]);
    expect(simulator.receivedRequests().map((r) => r.remoteAddress)).toEqual([ALLOWED]);
    expect(simulator.stats()).toMatchObject({ logins: 1, planReads: 1, forbidden: 0 });
  });

  test('a valid token but the forwarded call bound to another address: the provider refuses the call 403', async () => {
    const url = await forwardingApp(OTHER, tokenManager(ALLOWED));
    const response = await fetch(url);
    // The provider's 403 becomes the gateway's UPSTREAM_IP_NOT_WHITELISTED (502).
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ status: { description: 'UPSTREAM_IP_NOT_WHITELISTED' } });
    // The token call went out from the allowed address, the operation call from the other one.
    expect(simulator.receivedTokenRequests().map((r) => r.remoteAddress)).toEqual([ALLOWED]);
    expect(simulator.stats()).toMatchObject({ logins: 1, planReads: 0, forbidden: 1 });
  });

  test('a forwarded call from an address the host does not hold: 502 envelope, logged with the address, no crash', async () => {
    const logs = captureLogs();
    const url = await forwardingApp(NOT_HELD, tokenManager(ALLOWED), pino(logs.stream));
    const response = await fetch(url);
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ status: { description: 'UPSTREAM_UNAVAILABLE' } });
    const line = logs
      .text()
      .split('\n')
      .find((l) => l.includes('EADDRNOTAVAIL'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({
      route: 'plan',
      code: 'EADDRNOTAVAIL',
      localAddress: NOT_HELD,
    });
    // The gateway still serves: the next call fails the same clear way.
    expect((await fetch(url)).status).toBe(502);
  });
});
