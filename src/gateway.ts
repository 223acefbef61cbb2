// Builds a running gateway from a config: stores, token manager, forwarding, callers, HTTP server, shutdown.
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestHandler } from 'express';
import type { DestinationStream, Logger } from 'pino';
import { type CallerGuards, createApp } from './app';
import { authFailureLimit } from './callers/auth-failure-limit';
import { authenticate, requireScope } from './callers/authenticate';
import { type ClientRegistry, loadClientRegistry } from './callers/client-registry';
import { cors } from './callers/cors';
import { inboundAllowList } from './callers/inbound-allow-list';
import { createOidcVerifier } from './callers/oidc-verifier';
import { rateLimit } from './callers/rate-limit';
import type { GatewayConfig } from './config/gateway-config';
import { SIMULATOR_DEFAULT_PASSWORD, SIMULATOR_DEFAULT_USERNAME } from './config/simulator-config';
import type * as DevIdentityProviderModule from './dev-identity-provider/dev-identity-provider';
import type * as LocalWebAppModule from './dev-web-app/local-web-app';
import { type AuthFailureLog, createAuthFailureLog } from './observability/auth-failure-log';
import { createDocumentReference } from './observability/document-reference';
import { createLogger, flushLogger } from './observability/logger';
import {
  createMetrics,
  type Metrics,
  metricsEndpoint,
  registerAccessTokenTimeLeft,
} from './observability/metrics';
import { createReadiness, type Readiness } from './operations/readiness';
import { buildOpenApiDocument } from './routes/openapi';
import { FORWARDED_OPERATIONS } from './routes/operation-routes';
import { type BuiltSessions, buildBrowserSessions } from './sessions';
import { startSimulator } from './simulator/simulator';
import { createMemoryAnswerCache, createRedisAnswerCache } from './store/answer-cache';
import { createMemoryTokenStore } from './store/memory-token-store';
import { createRecordSeal } from './store/record-seal';
import { createRedisClient, type RedisClient, whenRedisReady } from './store/redis-connection';
import { createRedisTokenStore } from './store/redis-token-store';
import { createUpstreamCircuits } from './upstream/circuit-breaker';
import {
  type CredentialSource,
  createCredentialSource,
  staticCredentialSource,
} from './upstream/credentials';
import { deriveKey } from './upstream/derived-keys';
import { createForwarder } from './upstream/forwarder';
import { createPlanReader } from './upstream/plan-reader';
import { createTokenCipher } from './upstream/token-cipher';
import { createTokenClient } from './upstream/token-client';
import { createTokenManager } from './upstream/token-manager';
import type { TokenProvider } from './upstream/token-provider';
import { busySockets, createUpstreamAgent } from './upstream/upstream-agent';
import { createUpstreamSlots } from './upstream/upstream-slots';

export const GATEWAY_VERSION = '0.1.0';

export interface GatewayOptions {
  /** Where logs go instead of LOG_FILE/stdout (tests capture them). */
  readonly logStream?: DestinationStream;
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

/** How long start-up waits for Redis before serving degraded (tokens from this replica's own login). */
const REDIS_START_WAIT_MS = 2_000;

const CIRCUIT_STATE_VALUE = { closed: 0, 'half-open': 1, open: 2 } as const;

export async function startGateway(
  config: GatewayConfig,
  options: GatewayOptions = {},
): Promise<RunningGateway> {
  const logger = createLogger({ level: config.log.level, file: config.log.file, stream: options.logStream });
  const metrics = createMetrics();
  const closers: (() => Promise<void> | void)[] = [];
  const closeAll = async () => {
    for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => undefined);
  };

  try {
    const upstream = await resolveUpstream(config, logger);
    closers.push(() => upstream.close());

    const redis = createRedisClient(config.redis);
    if (redis) closers.push(() => quitRedis(redis));
    else
      logger.warn(
        'no Redis configured: tokens and rate limits live in this process only (local mode / one replica)',
      );
    watchRedisHealth(redis, logger, metrics);

    const encryptionKey = config.tokens.encryptionKey;
    const fingerprintKey = encryptionKey && deriveKey(encryptionKey, 'credential-fingerprint');
    const credentials =
      upstream.credentials ?? (await createCredentialSource(config.credentials, { logger, fingerprintKey }));
    closers.push(() => credentials.close());

    const tokenStore = redis ? createRedisTokenStore({ client: redis, logger }) : createMemoryTokenStore();
    // Closes its pub/sub connection (a duplicate of `redis`) before `redis` itself quits.
    closers.push(() => tokenStore.close());
    const tokenClient = createTokenClient({
      baseUrl: upstream.baseUrl,
      timeoutMs: config.upstream.timeoutMs,
      headers: config.upstream.staticHeaders,
      extraCa: config.upstream.extraCa,
    });
    closers.push(() => tokenClient.close?.());
    const tokens = createTokenManager({
      store: tokenStore,
      client: tokenClient,
      credentials,
      logger,
      metrics,
      settings: {
        upstreamBaseUrl: upstream.baseUrl,
        refreshSkewSeconds: config.tokens.refreshSkewSeconds,
        lockTtlMs: config.tokens.lockTtlMs,
        lockWaitMs: config.tokens.lockWaitMs,
        loginMinIntervalMs: config.tokens.loginMinIntervalMs,
        loginMaxIntervalMs: config.tokens.loginMaxIntervalMs,
        keyPrefix: config.redis.keyPrefix,
        encryptionKey: config.tokens.encryptionKey,
      },
    });
    if (redis && !(await whenRedisReady(redis, REDIS_START_WAIT_MS))) {
      logger.warn({ waitedMs: REDIS_START_WAIT_MS }, 'redis not reachable at start: starting degraded');
    }
    await tokens.start();
    closers.push(() => tokens.stop());
    registerAccessTokenTimeLeft(metrics, () => tokens.status().accessExpiresAt);

    const circuits = createUpstreamCircuits(FORWARDED_OPERATIONS, {
      ...config.upstream.circuit,
      onStateChange: (operation, state) => {
        metrics.circuitState.set({ operation }, CIRCUIT_STATE_VALUE[state]);
        logger.warn({ operation, circuit: state }, 'upstream circuit state changed');
      },
    });
    for (const operation of FORWARDED_OPERATIONS) metrics.circuitState.set({ operation }, 0);
    const agent = createUpstreamAgent(upstream.baseUrl, config.upstream.maxSockets, {
      extraCa: config.upstream.extraCa,
    });
    closers.push(() => agent.destroy());
    const slots = createUpstreamSlots({
      limit: config.upstream.maxSockets,
      queueTimeoutMs: config.upstream.queueTimeoutMs,
    });
    metrics.watchUpstreamPool({ socketsInUse: () => busySockets(agent), waiting: () => slots.waiting });
    const forwarder = createForwarder({
      baseUrl: upstream.baseUrl,
      agent,
      slots,
      tokens,
      circuits,
      timeoutMs: config.upstream.timeoutMs,
      staticHeaders: config.upstream.staticHeaders,
      metrics,
      logger,
    });
    const ttl = config.upstream.planCacheTtlSeconds;
    const plans = createPlanReader({
      forwarder,
      cache:
        ttl > 0
          ? {
              store: redis
                ? createRedisAnswerCache(
                    redis,
                    answerCachePrefix(config.redis.keyPrefix, upstream.baseUrl),
                    createRecordSeal(createTokenCipher(encryptionKey), metrics.storeRecordsRejected),
                  )
                : createMemoryAnswerCache(),
              ttlSeconds: ttl,
            }
          : undefined,
    });

    const registry = loadClientRegistry(config.callers.clientsFile, {
      logger,
      watch: true,
      metrics,
      refuseDevelopmentKey: config.production,
    });
    closers.push(() => registry.close());
    const failureLog = createAuthFailureLog({ logger });
    // Closed after the server (closers run in reverse), so the last interval's counts are written at shutdown.
    closers.push(() => failureLog.close());
    const browser = buildBrowserSessions({ config, redis, tokenStore, registry, logger, metrics });
    const guards = callerGuards(config, registry, redis, logger, metrics, failureLog, browser);

    const readiness = createReadiness({
      tokens,
      storeKind: redis ? 'redis' : 'memory',
      circuitStates: () => circuits.states(),
      storeHealthy: redis ? () => redis.status === 'ready' : undefined,
      clientRegistry: registry,
    });
    const app = createApp({
      config,
      logger,
      metrics,
      guards,
      forwarder,
      plans,
      readiness,
      documentReference: createDocumentReference(config.tokens.encryptionKey),
      openApiDocument: buildOpenApiDocument(GATEWAY_VERSION),
      serveMetrics: config.server.metricsOnMainPort,
      sessionRoutes: browser?.sessions.router,
      localWebApp: browser && config.mode === 'local' ? loadLocalWebApp() : undefined,
    });

    // Node enforces headersTimeout/requestTimeout only when it checks its connections (every 30 s by default):
    // check every second so SERVER_HEADERS_TIMEOUT_MS and SERVER_REQUEST_TIMEOUT_MS cut slow clients on time.
    const server = hardenServer(createServer({ connectionsCheckingInterval: 1_000 }, app), config);
    const { url, address: listenAddress } = await listen(server, config.server.host, config.server.port);
    closers.push(() => closeServer(server, 0));
    const identityProvider =
      browser && config.mode === 'local' && !config.sessions?.issuer
        ? await startLocalIdentityProvider(url, browser, config)
        : undefined;
    if (identityProvider) closers.push(() => identityProvider.close());
    let metricsUrl: string | undefined;
    let metricsServer: Server | undefined;
    if (config.server.metricsPort !== undefined) {
      const serveMetrics = metricsEndpoint(metrics);
      metricsServer = createServer((req, res) => {
        if (req.url === '/metrics' && req.method === 'GET') serveMetrics(req, res);
        else res.writeHead(404, { 'cache-control': 'no-store' }).end();
      });
      metricsUrl = (await listen(metricsServer, config.server.host, config.server.metricsPort)).url;
    }

    let shuttingDown: Promise<void> | undefined;
    return {
      url,
      listenAddress,
      metricsUrl,
      logger,
      metrics,
      readiness,
      tokens,
      simulatorUrl: upstream.simulatorUrl,
      identityProvider,
      async reload() {
        await credentials.reload();
        registry.reload();
      },
      shutdown() {
        shuttingDown ??= (async () => {
          readiness.startDraining();
          logger.info(
            { timeoutMs: config.server.shutdownTimeoutMs },
            'draining: finishing in-flight requests',
          );
          await closeServer(server, config.server.shutdownTimeoutMs);
          if (metricsServer) await closeServer(metricsServer, 1_000);
          await closeAll();
          logger.info('stopped');
          await flushLogger(logger);
        })();
        return shuttingDown;
      },
    };
  } catch (error) {
    await closeAll();
    await flushLogger(logger);
    throw error;
  }
}

/** Cached answers are namespaced by upstream, like tokens: sandbox and production never share a plan. */
function answerCachePrefix(keyPrefix: string, baseUrl: string): string {
  return `${keyPrefix}cache:${createHash('sha256').update(baseUrl).digest('hex').slice(0, 16)}:`;
}

interface ResolvedUpstream {
  readonly baseUrl: string;
  readonly credentials?: CredentialSource;
  readonly simulatorUrl?: string;
  close(): Promise<void>;
}

/** Local mode starts the bundled simulator on loopback and uses its development credentials. */
async function resolveUpstream(config: GatewayConfig, logger: Logger): Promise<ResolvedUpstream> {
  if (config.mode === 'upstream' && config.upstream.baseUrl) {
    return { baseUrl: config.upstream.baseUrl, close: async () => undefined };
  }
  const simulator = await startSimulator({ host: '127.0.0.1', port: 0 });
  logger.warn({ simulator: simulator.url }, 'local mode: the upstream is the bundled Payment API simulator');
  return {
    baseUrl: simulator.url,
    simulatorUrl: simulator.url,
    credentials: staticCredentialSource(SIMULATOR_DEFAULT_USERNAME, SIMULATOR_DEFAULT_PASSWORD),
    close: () => simulator.close(),
  };
}

export interface LocalIdentityProvider {
  readonly issuer: string;
  readonly username: string;
  readonly password: string;
  close(): Promise<void>;
}

/** Local mode: the development identity provider on loopback (imported here only, never in production). */
async function startLocalIdentityProvider(
  gatewayUrl: string,
  browser: BuiltSessions,
  config: GatewayConfig,
): Promise<LocalIdentityProvider> {
  // Loaded on demand so production start-up never loads the development provider (or oidc-provider).
  const {
    developmentUser,
    startDevIdentityProvider,
  }: typeof DevIdentityProviderModule = require('./dev-identity-provider/dev-identity-provider');
  const user = developmentUser();
  const clientSecret = randomBytes(24).toString('base64url');
  const clientId = config.sessions?.clientId ?? 'local-web-app';
  const provider = await startDevIdentityProvider({
    users: [user],
    clients: [{ clientId, clientSecret, origin: gatewayUrl }],
  });
  browser.connect({
    issuer: provider.issuer,
    clientId,
    clientSecret,
    publicOrigin: gatewayUrl,
    scopes: config.sessions?.scopes ?? 'openid profile email',
  });
  return { issuer: provider.issuer, username: user.username, password: user.password, close: provider.close };
}

/** Local mode's web app at / (imported here only, never in production). */
function loadLocalWebApp(): RequestHandler {
  const { localWebApp }: typeof LocalWebAppModule = require('./dev-web-app/local-web-app');
  return localWebApp();
}

function callerGuards(
  config: GatewayConfig,
  registry: ClientRegistry,
  redis: RedisClient | undefined,
  logger: Logger,
  metrics: Metrics,
  failureLog: AuthFailureLog,
  browser: BuiltSessions | undefined,
): CallerGuards {
  const { oidc } = config.callers;
  return {
    inboundAllowList: inboundAllowList(config.server.inboundAllowCidrs),
    cors: cors({ origins: config.server.corsOrigins, registry }),
    authenticate: authenticate({
      registry,
      oidc: oidc ? createOidcVerifier({ ...oidc, registry, logger }) : undefined,
      sessions: browser?.sessions,
      failures: authFailureLimit({
        redis,
        keyPrefix: config.redis.keyPrefix,
        ...config.callers.authFailureLimit,
        metrics,
        logger,
        failureLog,
      }),
    }),
    requireScope,
    rateLimit: rateLimit({
      redis,
      keyPrefix: config.redis.keyPrefix,
      defaultLimit: config.callers.defaultRateLimit,
      metrics,
      logger,
    }),
  };
}

/**
 * Timeouts against slow clients (slowloris, trickled bodies), and a keep-alive timeout ABOVE the idle timeout of the
 * load balancer in front, so that the balancer, not the gateway, closes idle connections (no 502 on reuse).
 */
function hardenServer(server: Server, config: GatewayConfig): Server {
  server.headersTimeout = config.server.headersTimeoutMs;
  server.requestTimeout = config.server.requestTimeoutMs;
  server.keepAliveTimeout = config.server.keepAliveTimeoutMs;
  server.maxHeadersCount = 100;
  return server;
}

/** The bound address as the OS reports it, and a URL this host can connect to (loopback for a wildcard bind). */
function listen(server: Server, host: string, port: number): Promise<{ url: string; address: string }> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const bound = server.address() as AddressInfo;
      const ipv6 = bound.family === 'IPv6';
      const address = `${ipv6 ? `[${bound.address}]` : bound.address}:${bound.port}`;
      const wildcard = bound.address === '0.0.0.0' || bound.address === '::';
      const reachable = wildcard
        ? ipv6
          ? '[::1]'
          : '127.0.0.1'
        : ipv6
          ? `[${bound.address}]`
          : bound.address;
      resolve({ url: `http://${reachable}:${bound.port}`, address });
    });
  });
}

/**
 * Stops accepting, lets in-flight requests finish, and cuts what is left after `timeoutMs`. A keep-alive
 * connection whose request was in flight turns idle when it is answered: it is closed then, not after the
 * keep-alive timeout, so the drain ends as soon as the last answer is out.
 */
function closeServer(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const deadline = setTimeout(() => server.closeAllConnections(), timeoutMs);
    deadline.unref();
    const sweep = setInterval(() => server.closeIdleConnections(), 50);
    sweep.unref();
    server.close(() => {
      clearTimeout(deadline);
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}

async function quitRedis(redis: RedisClient): Promise<void> {
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}

/** Logs each Redis outage once (ioredis retries on its own) and keeps the store-health gauge current. */
function watchRedisHealth(redis: RedisClient | undefined, logger: Logger, metrics: Metrics): void {
  if (!redis) {
    metrics.storeHealthy.set(1);
    return;
  }
  let down = false;
  redis.on('ready', () => {
    metrics.storeHealthy.set(1);
    if (down) logger.info('redis reachable again');
    down = false;
  });
  redis.on('close', () => metrics.storeHealthy.set(0));
  redis.on('error', (error: Error) => {
    metrics.storeHealthy.set(0);
    if (!down) logger.warn({ error: error.message }, 'redis unreachable: serving from memory, reconnecting');
    down = true;
  });
}
