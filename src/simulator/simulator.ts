// The simulator's composition root: an Express app and its control handle, and a server that runs them.
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import express, { type Express } from 'express';
import { createAnswerLog } from './answer-log';
import { CONTROL_PREFIX, createControlRouter, type SimulatorControl } from './control-routes';
import { createFaultInjector } from './faults';
import type { SimulatorOptions } from './options';
import { createRequestLog, createTokenRequestLog } from './request-log';
import { SIMULATOR_DEFAULTS } from './simulator-config';
import { createStats } from './stats';
import { createTokenIssuer } from './token-issuer';
import { createUpstreamRouter } from './upstream-routes';

export type { SimulatorControl };

export interface SimulatorApp {
  app: Express;
  control: SimulatorControl;
  /** Cancels pending injected latency; call when the server stops. */
  dispose(): void;
}

export interface SimulatorDependencies {
  /** Clock for token iat/exp and expiry checks (ms since the epoch). */
  now?: () => number;
  /** Source of randomness for errorRate faults. */
  random?: () => number;
}

export interface RunningSimulator extends SimulatorControl {
  /** `http://127.0.0.1:<port>` (or the configured host when it is not a wildcard). */
  url: string;
  port: number;
  /** TLS handshakes completed so far (0 over plain HTTP): keep-alive reuse shows as few handshakes. */
  secureConnections(): number;
  /** Presents another certificate to new connections (a provider's renewal, or a broken one); HTTPS only. */
  useCertificate(tls: { cert: string; key: string }): void;
  /** Stops listening and destroys open (keep-alive) connections. */
  close(): Promise<void>;
}

export function createSimulatorApp(
  options: SimulatorOptions,
  deps: SimulatorDependencies = {},
): SimulatorApp {
  const stats = createStats();
  const faults = createFaultInjector(stats, deps.random, deps.now);
  const requestLog = createRequestLog();
  const tokenRequestLog = createTokenRequestLog();
  const answerLog = createAnswerLog();
  const issuer = createTokenIssuer({
    accessTtlSeconds: options.accessTtlSeconds,
    refreshTtlSeconds: options.refreshTtlSeconds,
    now: deps.now,
  });

  const control: SimulatorControl = {
    stats: () => stats.snapshot(),
    reset() {
      stats.reset();
      faults.clear();
      requestLog.clear();
      tokenRequestLog.clear();
      answerLog.clear();
    },
    setFaults: (input) => faults.set(input),
    faults: () => faults.current(),
    callsPerSecond: () => faults.callsPerSecond(),
    revokeTokens: () => issuer.revokeAll(),
    rotateSigningKey: () => issuer.rotateSigningKey(),
    receivedRequests: () => requestLog.list(),
    receivedTokenRequests: () => tokenRequestLog.list(),
    answers: () => answerLog.list(),
  };

  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  // Upstream internals the gateway must strip before answering its callers.
  app.use((_req, res, next) => {
    res.set({ Server: 'payment-simulator', 'X-Powered-By': 'simulator' });
    next();
  });
  app.use(CONTROL_PREFIX, createControlRouter(control));
  app.use(createUpstreamRouter({ options, issuer, stats, faults, requestLog, tokenRequestLog, answerLog }));

  return { app, control, dispose: () => faults.dispose() };
}

/** Starts the simulator on `options.host`:`options.port` (port 0 = an ephemeral port); unset options take defaults. */
export async function startSimulator(
  options: Partial<SimulatorOptions> = {},
  deps: SimulatorDependencies = {},
): Promise<RunningSimulator> {
  const resolved: SimulatorOptions = { ...SIMULATOR_DEFAULTS, ...options };
  const { app, control, dispose } = createSimulatorApp(resolved, deps);
  let secureConnections = 0;
  let server: Server;
  if (resolved.tls) {
    const https = createHttpsServer({ cert: resolved.tls.cert, key: resolved.tls.key }, app);
    https.on('secureConnection', () => {
      secureConnections += 1;
    });
    // A client refusing the certificate ends the handshake: not the simulator's error to report.
    https.on('tlsClientError', () => undefined);
    server = https;
  } else server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(resolved.port, resolved.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    ...control,
    url: `${resolved.tls ? 'https' : 'http'}://${urlHost(resolved.host)}:${port}`,
    port,
    secureConnections: () => secureConnections,
    useCertificate(tls) {
      if (!('setSecureContext' in server)) throw new Error('the simulator serves plain HTTP');
      (server as import('node:https').Server).setSecureContext(tls);
    },
    close() {
      dispose();
      return new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      });
    },
  };
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === 'localhost') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
