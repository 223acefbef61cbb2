// The gateway's HTTP servers: hardening against slow clients, listening, draining, and the separate metrics server.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { type Built, building } from './assembly/lifecycle';
import type { GatewayConfig } from './config/gateway-config';
import { closeServer, type Listening, type ListenOptions, listenSpread } from './http/accept-sockets';
import { expressMessageClasses } from './http/express-messages';
import { answerProtocolErrors, MAX_HEADER_FIELDS } from './http/protocol-errors';
import { type Metrics, metricsEndpoint } from './observability/metrics';

export interface GatewayServers {
  /** A URL this host reaches the gateway on: loopback when it is bound to every interface. */
  readonly url: string;
  /** Where the socket is really bound, as the OS reports it. */
  readonly listenAddress: string;
  readonly metricsUrl?: string;
  /** Stops accepting and finishes in-flight requests, waiting at most `timeoutMs`. */
  drain(timeoutMs: number): Promise<void>;
}

export async function startServers(
  config: GatewayConfig,
  app: Express,
  metrics: Metrics,
  logger: Logger,
): Promise<Built<GatewayServers>> {
  return building(async (closers) => {
    // Node enforces headersTimeout/requestTimeout only when it checks its connections (every 30 s by default):
    // check every second so SERVER_HEADERS_TIMEOUT_MS and SERVER_REQUEST_TIMEOUT_MS cut slow clients on time.
    // Requests and responses are built on the app's Express prototypes (expressMessageClasses).
    const server = hardenServer(
      createServer(
        // A request without Host is answered by the app, in the envelope (headRefusal), not by Node's bare 400.
        { connectionsCheckingInterval: 1_000, requireHostHeader: false, ...expressMessageClasses(app) },
        app,
      ),
      config,
    );
    answerProtocolErrors(server, logger, { localMode: config.mode === 'local' });
    const {
      url,
      address: listenAddress,
      listening,
    } = await listen(server, {
      host: config.server.host,
      port: config.server.port,
      backlog: config.server.listenBacklog,
      acceptSockets: config.server.acceptSockets,
    });
    closers.push(() => closeServer(server, 0, listening));
    let metricsUrl: string | undefined;
    let metricsServer: Server | undefined;
    if (config.server.metricsPort !== undefined) {
      metricsServer = hardenServer(createMetricsServer(metrics), config);
      metricsUrl = (
        await listen(metricsServer, {
          host: config.server.host,
          port: config.server.metricsPort,
          acceptSockets: 1,
        })
      ).url;
    }
    return {
      url,
      listenAddress,
      metricsUrl,
      async drain(timeoutMs: number) {
        await closeServer(server, timeoutMs, listening);
        if (metricsServer) await closeServer(metricsServer, 1_000);
      },
    };
  });
}

/**
 * The scrape port: `/metrics` alone, with the main server's timeouts (a slow client cannot hold its connections for
 * Node's defaults, a minute for headers), and Node's own bare answers otherwise (no caller but Prometheus reads them).
 */
function createMetricsServer(metrics: Metrics): Server {
  const serveMetrics = metricsEndpoint(metrics);
  return createServer({ connectionsCheckingInterval: 1_000 }, (req, res) => {
    if (req.url === '/metrics' && req.method === 'GET') serveMetrics(req, res);
    else res.writeHead(404, { 'cache-control': 'no-store' }).end();
  });
}

/**
 * Timeouts against slow clients (slowloris, trickled bodies), and a keep-alive timeout ABOVE the idle timeout of the
 * load balancer in front, so that the balancer, not the gateway, closes idle connections (no 502 on reuse).
 */
function hardenServer(server: Server, config: GatewayConfig): Server {
  server.headersTimeout = config.server.headersTimeoutMs;
  server.requestTimeout = config.server.requestTimeoutMs;
  server.keepAliveTimeout = config.server.keepAliveTimeoutMs;
  // One field over the limit is read, so that headRefusal can tell a request over it from one at it.
  server.maxHeadersCount = MAX_HEADER_FIELDS + 1;
  return server;
}

/**
 * Listens (on `acceptSockets` sockets: accept-sockets.ts); returns the bound address as the OS reports it, a URL this
 * host can connect to (loopback for a wildcard bind), and the sockets to close with the server.
 */
async function listen(
  server: Server,
  options: ListenOptions,
): Promise<{ url: string; address: string; listening: Listening }> {
  const listening = await listenSpread(server, options);
  const bound = server.address() as AddressInfo;
  const ipv6 = bound.family === 'IPv6';
  const address = `${ipv6 ? `[${bound.address}]` : bound.address}:${bound.port}`;
  const wildcard = bound.address === '0.0.0.0' || bound.address === '::';
  const reachable = wildcard ? (ipv6 ? '[::1]' : '127.0.0.1') : ipv6 ? `[${bound.address}]` : bound.address;
  return { url: `http://${reachable}:${bound.port}`, address, listening };
}
