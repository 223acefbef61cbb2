// Builds a running gateway from a config, one builder per concern, and closes what it built in reverse order.
import type { Express } from 'express';
import type { DestinationStream, Logger } from 'pino';
import { createApp } from './app';
import { buildCallerGuards, type Callers } from './assembly/caller-guards';
import { buildForwarding, type Forwarding } from './assembly/forwarding';
import { createLifecycle, type Lifecycle } from './assembly/lifecycle';
import {
  type LocalIdentityProvider,
  type LocalSessions,
  startLocalIdentityProvider,
} from './assembly/local-sessions';
import { buildObservability, type Observability } from './assembly/observability';
import { buildRedis } from './assembly/redis';
import { buildTokens } from './assembly/tokens';
import { type LocalUpstream, resolveUpstream } from './assembly/upstream';
import type { GatewayConfig } from './config/gateway-config';
import { createDocumentReference } from './observability/document-reference';
import { flushLogger } from './observability/logger';
import type { Metrics } from './observability/metrics';
import { createReadiness, type Readiness } from './operations/readiness';
import { buildOpenApiDocument } from './routes/openapi';
import { type GatewayServers, startServers } from './server';
import type { CredentialSource, TokenProvider } from './tokens';

export type { LocalIdentityProvider, LocalSessions } from './assembly/local-sessions';
export type { LocalUpstream } from './assembly/upstream';

export const GATEWAY_VERSION = '0.1.0';

export interface GatewayOptions {
  /** Where logs go instead of LOG_FILE/stdout (tests capture them). */
  readonly logStream?: DestinationStream;
  /** Local mode's upstream, the bundled simulator (src/local-mode.ts); the gateway closes it at shutdown. */
  readonly localUpstream?: LocalUpstream;
  /** Local mode's web app and development identity provider (src/local-mode.ts), when browser sessions are on. */
  readonly localSessions?: LocalSessions;
}

export interface RunningGateway {
  /** A URL this host reaches the gateway on: loopback when it is bound to every interface. */
  readonly url: string;
  /** Where the socket is really bound, as the OS reports it (`0.0.0.0:8080` means every interface). */
  readonly listenAddress: string;
  readonly metricsUrl?: string;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly readiness: Readiness;
  readonly tokens: TokenProvider;
  /** The simulator URL in local mode. */
  readonly simulatorUrl?: string;
  /** Local mode: the development identity provider and the user who can log in there. */
  readonly identityProvider?: LocalIdentityProvider;
  /** SIGHUP: re-read the credential files and the client registry. */
  reload(): Promise<void>;
  /** Drain and stop: readiness 503, stop accepting, finish in-flight requests (bounded), release everything. */
  shutdown(): Promise<void>;
}

export async function startGateway(
  config: GatewayConfig,
  options: GatewayOptions = {},
): Promise<RunningGateway> {
  const observability = buildObservability(config, GATEWAY_VERSION, options.logStream);
  const { logger, metrics, tracing } = observability;
  const life = createLifecycle();
  try {
    // Closed last (closers run in reverse): the spans of the drained requests are exported before the process ends.
    await life.use({ made: tracing, closers: [() => tracing.shutdown()] });
    const upstream = await life.use(resolveUpstream(config, options.localUpstream, observability));
    const redis = await life.use(buildRedis(config, observability));
    const { tokens, credentials, store, seal } = await life.use(
      buildTokens(config, upstream, redis, observability),
    );
    const forwarding = await life.use(
      buildForwarding(config, upstream.baseUrl, tokens, redis.client, seal, observability),
    );
    const callers = await life.use(buildCallerGuards(config, redis, { store, seal }, observability));
    const { guards, registry, browser } = callers;
    const readiness = createReadiness({
      tokens,
      storeKind: redis.client ? 'redis' : 'memory',
      circuitStates: forwarding.circuitStates,
      storeHealthy: redis.client ? redis.health.healthy : undefined,
      clientRegistry: registry,
    });
    const app = gatewayApp(config, observability, { guards, forwarding, readiness, browser }, options);
    const servers = await life.use(startServers(config, app, metrics));
    const identityProvider = await life.use(
      startLocalIdentityProvider(config, servers.url, browser, options),
    );
    const parts = {
      logger,
      metrics,
      readiness,
      tokens,
      credentials,
      registry,
      servers,
      life,
      identityProvider,
    };
    return runningGateway(config, parts, upstream.simulatorUrl);
  } catch (error) {
    await life.closeAll();
    await flushLogger(logger);
    throw error;
  }
}

/** The Express app over what the builders made. */
function gatewayApp(
  config: GatewayConfig,
  { logger, metrics, tracing }: Observability,
  made: Pick<Callers, 'guards' | 'browser'> & {
    readonly forwarding: Forwarding;
    readonly readiness: Readiness;
  },
  options: GatewayOptions,
): Express {
  return createApp({
    config,
    logger,
    metrics,
    guards: made.guards,
    forwarder: made.forwarding.forwarder,
    plans: made.forwarding.plans,
    readiness: made.readiness,
    documentReference: createDocumentReference(config.tokens.encryptionKey),
    openApiDocument: buildOpenApiDocument(GATEWAY_VERSION, {
      sessions: made.browser !== undefined,
      localMode: config.mode === 'local',
    }),
    serveMetrics: config.server.metricsOnMainPort,
    tracing,
    sessionRoutes: made.browser?.sessions.router,
    localWebApp: made.browser && options.localSessions?.webApp,
  });
}

interface GatewayParts {
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly readiness: Readiness;
  readonly tokens: TokenProvider;
  readonly credentials: CredentialSource;
  readonly registry: { reload(): void };
  readonly servers: GatewayServers;
  readonly life: Lifecycle;
  readonly identityProvider?: LocalIdentityProvider;
}

function runningGateway(config: GatewayConfig, parts: GatewayParts, simulatorUrl?: string): RunningGateway {
  const { logger, readiness, servers } = parts;
  let shuttingDown: Promise<void> | undefined;
  return {
    url: servers.url,
    listenAddress: servers.listenAddress,
    metricsUrl: servers.metricsUrl,
    logger,
    metrics: parts.metrics,
    readiness,
    tokens: parts.tokens,
    simulatorUrl,
    identityProvider: parts.identityProvider,
    async reload() {
      await parts.credentials.reload();
      parts.registry.reload();
    },
    shutdown() {
      shuttingDown ??= (async () => {
        readiness.startDraining();
        logger.info({ timeoutMs: config.server.shutdownTimeoutMs }, 'draining: finishing in-flight requests');
        await servers.drain(config.server.shutdownTimeoutMs);
        await parts.life.closeAll();
        logger.info('stopped');
        await flushLogger(logger);
      })();
      return shuttingDown;
    },
  };
}
