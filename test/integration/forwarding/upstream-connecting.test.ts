// What the forwarder's undici attempt does when its timeout ends it while the pool is still connecting (the TLS
// handshake not done yet): the request was never written, so the provider never saw it. The provider here is a real
// HTTPS server on loopback whose handshake starts late (or never); the caller is a real Express app.

import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net';
import { pino } from 'pino';
import {
  createForwarder,
  createUpstreamCircuits,
  createUpstreamPool,
  createUpstreamSlots,
} from '../../../src/forwarding';
import { createMetrics } from '../../../src/observability/metrics';
import { STATIC_TOKENS, serveForwardingCaller } from '../../support/forwarding-caller';
import { createTestPki } from '../../support/test-certificates';

/** The call's own timeout: shorter than the pool's connect bound, as an operation's x-gateway.timeoutMs may be. */
const CALL_TIMEOUT_MS = 300;
const CONNECT_TIMEOUT_MS = 3_000;

const closers: (() => unknown)[] = [];
/** How long the provider lets a new connection wait before its TLS handshake starts (Infinity: never). */
let handshakeDelayMs = Number.POSITIVE_INFINITY;
let requestsSeen = 0;
/** Budget units the forwarder gave back (a granted call that never reached the provider). */
let unitsGivenBack = 0;
/** Handshakes the provider saw end, done or cut by the client. */
let handshakesEnded = 0;

async function startProvider(pki: Awaited<ReturnType<typeof createTestPki>>): Promise<string> {
  const https = createHttpsServer(pki.good, (req, res) => {
    requestsSeen += 1;
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
  });
  https.on('secureConnection', () => {
    handshakesEnded += 1;
  });
  https.on('tlsClientError', () => {
    handshakesEnded += 1;
  });
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const tcp = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    if (!Number.isFinite(handshakeDelayMs)) return; // accepted, never answered: the handshake hangs
    const timer = setTimeout(() => https.emit('connection', socket), handshakeDelayMs);
    timers.add(timer);
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const timer of timers) clearTimeout(timer);
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => tcp.close(resolve));
  });
  return `https://127.0.0.1:${(tcp.address() as AddressInfo).port}`;
}

async function startCaller(baseUrl: string, caPem: string): Promise<string> {
  const pool = createUpstreamPool(baseUrl, {
    connections: 1,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    extraCa: [caPem],
  });
  closers.push(() => pool.destroy());
  const forwarder = createForwarder({
    baseUrl,
    pool,
    slots: createUpstreamSlots({ limit: 1, queueTimeoutMs: 1_000 }),
    tokens: STATIC_TOKENS,
    circuits: createUpstreamCircuits(['thing'], {
      failureRatio: 0.5,
      windowMs: 10_000,
      minimumCalls: 1_000,
      resetMs: 1_000,
    }),
    timeoutMs: CONNECT_TIMEOUT_MS,
    staticHeaders: {},
    metrics: createMetrics(),
    logger: pino({ enabled: false }),
    budget: {
      admit: () => ({ granted: true }),
      observe: () => undefined,
      giveBack: () => {
        unitsGivenBack += 1;
      },
    },
  });
  return serveForwardingCaller(
    forwarder,
    { requestId: 'upstream-connecting-test', timeoutMs: CALL_TIMEOUT_MS },
    closers,
  );
}

let pki: Awaited<ReturnType<typeof createTestPki>>;

beforeAll(async () => {
  pki = await createTestPki();
});

/** A provider and a caller of their own (one connection), so that no earlier connect is still pending. */
async function freshCaller(): Promise<string> {
  return startCaller(await startProvider(pki), pki.caPem);
}

afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('a call whose timeout ends it before its connection is made', () => {
  it('is a timeout, but not an unknown outcome: the request was never written (SPEC §13 keeps only a sent one)', async () => {
    handshakeDelayMs = Number.POSITIVE_INFINITY;
    const caller = await freshCaller();
    const response = await fetch(`${caller}/write`, { method: 'POST' });
    expect(response.status).toBe(504);
    expect(response.headers.get('x-upstream-unknown')).toBe('false');
    expect(requestsSeen).toBe(0);
    // SPEC §11: a granted call that never reached the provider gives its unit back.
    expect(unitsGivenBack).toBe(1);
    requestsSeen = 0;
  });

  it('leaves the connection it was waiting for to the next call, unsent', async () => {
    // A fresh connection for this test: the handshake now starts after twice the call's timeout.
    handshakeDelayMs = 2 * CALL_TIMEOUT_MS;
    const caller = await freshCaller();
    const before = handshakesEnded;
    const first = await fetch(`${caller}/read`);
    expect(first.status).toBe(504);
    await until(() => handshakesEnded > before);
    // The handshake is done: the timed-out call must not be written on it, nor cost it. A destroyed connection would
    // make the next call wait for a new handshake longer than its timeout.
    const second = await fetch(`${caller}/read`);
    expect(second.status).toBe(200);
    expect(requestsSeen).toBe(1);
  });
});
