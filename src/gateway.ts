// Builds a running gateway from a config, one builder per concern, and closes what it built in reverse order.
import type { Express, Request, Response } from 'express';
import type { DestinationStream, Logger } from 'pino';
import type { AccountSet } from './accounts/account-set';
import { createApp } from './app';
import { buildAccounts } from './assembly/accounts';
import { buildCallerGuards, type Callers } from './assembly/caller-guards';
import { buildCatalogue } from './assembly/catalogue';
import { createLifecycle, type Lifecycle } from './assembly/lifecycle';
import {
  type LocalIdentityProvider,
  type LocalSessions,
  startLocalIdentityProvider,
} from './assembly/local-sessions';
import { buildObservability, type Observability } from './assembly/observability';
import { buildRedis } from './assembly/redis';
import { buildSharedTokens } from './assembly/tokens';
import { type LocalUpstream, resolveUpstream } from './assembly/upstream';
import { buildUsage } from './assembly/usage';
import type { Caller } from './callers/caller';
import type { CatalogueSource } from './catalogue';
import type { GatewayConfig } from './config/gateway-config';
import { buildIdempotency, type Idempotency } from './idempotency';
import { createDocumentReference } from './observability/document-reference';
import { flushLogger } from './observability/logger';
import type { Metrics } from './observability/metrics';
import { createReadiness, type Readiness } from './operations/readiness';
import { buildOpenApiDocument } from './routes/openapi';
import { type GatewayServers, startServers } from './server';
import type { RedisClient } from './store/redis-connection';
import type { RecordSeal, TokenProvider } from './tokens';
import { requestUsageRecorder } from './usage';

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
  /** The provider accounts this replica serves (SPEC §10). */
  readonly accounts: AccountSet;
  /** The token provider of the first account (the only one of a single-account deployment). */
  readonly tokens: TokenProvider;
  /** The simulator URL in local mode. */
  readonly simulatorUrl?: string;
  /** Local mode: the development identity provider and the user who can log in there. */
  readonly identityProvider?: LocalIdentityProvider;
  /** SIGHUP: re-read the accounts file, every account's credential files, the client registry and the catalogue. */
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
    const shared = await life.use(buildSharedTokens(config, redis, observability));
    const usage = await life.use(buildUsage(config, redis, observability));
    const catalogue = await life.use(buildCatalogue(config, observability));
    const accounts = await life.use(
      buildAccounts(config, upstream.source, redis, shared, observability, usage.usage.quotas, catalogue),
    );
    const callers = await life.use(buildCallerGuards(config, redis, shared, accounts, observability));
    const { guards, registry, browser } = callers;
    usage.quotasFrom(registry);
    const readiness = createReadiness({
      accounts,
      storeKind: redis.client ? 'redis' : 'memory',
      storeHealthy: redis.client ? redis.health.healthy : undefined,
      clientRegistry: registry,
      ledgerDurability: redis.client || config.usage.redis ? usage.durability : undefined,
    });
    const onFinished = requestUsageRecorder(usage.usage.ledger, catalogue.served, (caller) =>
      defaultAccountOf(caller, accounts),
    );
    const app = gatewayApp(
      config,
      observability,
      { guards, accounts, readiness, browser, onFinished, catalogue, redis, shared },
      options,
    );
    const servers = await life.use(startServers(config, app, metrics, logger));
    const identityProvider = await life.use(
      startLocalIdentityProvider(config, servers.url, browser, options),
    );
    const parts = {
      logger,
      metrics,
      readiness,
      accounts,
      registry,
      catalogue,
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
    readonly accounts: AccountSet;
    readonly readiness: Readiness;
    readonly onFinished: (req: Request, res: Response) => void;
    /** What idempotency keys are kept in (docs/idempotency.md), sealed with. */
    readonly redis: { readonly client?: RedisClient };
    readonly shared: { readonly seal: RecordSeal };
    readonly catalogue: CatalogueSource;
  },
  options: GatewayOptions,
): Express {
  return createApp({
    config,
    logger,
    metrics,
    guards: made.guards,
    readiness: made.readiness,
    documentReference: createDocumentReference(config.tokens.encryptionKey),
    idempotency: idempotencyOf(config, made.redis, made.shared, made.accounts, { metrics, logger }),
    catalogue: made.catalogue,
    openApiDocument: (catalogue) =>
      buildOpenApiDocument(GATEWAY_VERSION, catalogue, {
        sessions: made.browser !== undefined,
        localMode: config.mode === 'local',
      }),
    serveMetrics: config.server.metricsOnMainPort,
    tracing,
    sessionRoutes: made.browser?.sessions.router,
    localWebApp: made.browser && options.localSessions?.webApp,
    onFinished: made.onFinished,
  });
}

/** Idempotency-Key (SPEC §13) over the shared store, records sealed like every shared record. */
function idempotencyOf(
  config: GatewayConfig,
  redis: { readonly client?: RedisClient },
  shared: { readonly seal: RecordSeal },
  accounts: Pick<AccountSet, 'get'>,
  { metrics, logger }: Pick<Observability, 'metrics' | 'logger'>,
): Idempotency {
  return buildIdempotency({
    redis: redis.client,
    seal: shared.seal,
    keyPrefix: config.redis.keyPrefix,
    ttlSeconds: config.upstream.idempotencyTtlSeconds,
    forwardLimitMsOf: (id, operationTimeoutMs) =>
      forwardLimitMs(config, accounts.get(id)?.spec.timeoutMs, operationTimeoutMs),
    metrics,
    logger,
  });
}

/**
 * The longest one forwarded request can take before the forwarder gives up (SPEC §13's lease is this plus a margin):
 * two attempts (the single retry after a 401), each after its own wait for budget, a token (the fleet lock's wait,
 * then a refresh and a login at the account's timeout: the renewal after the 401 is one more) and a socket.
 */
export function forwardLimitMs(
  config: Pick<GatewayConfig, 'upstream' | 'tokens'>,
  accountTimeoutMs: number | undefined,
  operationTimeoutMs: number | undefined,
): number {
  const { upstream, tokens } = config;
  const tokenCallMs = accountTimeoutMs ?? upstream.timeoutMs;
  const attemptMs =
    upstream.budget.waitMs +
    tokens.lockWaitMs +
    2 * tokenCallMs +
    upstream.queueTimeoutMs +
    (operationTimeoutMs ?? tokenCallMs);
  return 2 * attemptMs;
}

/** The account a request would have used (its client's default), for refusals made before it chose one. */
function defaultAccountOf(caller: Caller, accounts: Pick<AccountSet, 'soleId'>): string | undefined {
  return caller.accounts?.[0] ?? accounts.soleId();
}

interface GatewayParts {
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly readiness: Readiness;
  readonly accounts: AccountSet;
  readonly registry: { reload(): void };
  readonly catalogue: Pick<CatalogueSource, 'reload'>;
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
    accounts: parts.accounts,
    get tokens() {
      const first = parts.accounts.all()[0];
      if (!first) throw new Error('no provider account is running');
      return first.tokens;
    },
    simulatorUrl,
    identityProvider: parts.identityProvider,
    async reload() {
      // The accounts first: an account added to the file and to the registry at once is known when the registry
      // checks its entries.
      await parts.accounts.reload();
      await Promise.all(parts.accounts.all().map((account) => account.credentials.reload()));
      parts.registry.reload();
      parts.catalogue.reload();
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
