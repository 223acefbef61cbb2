// Reads the environment once (and the *_FILE secrets it points to), validates it and returns a frozen config.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError, type ConfigProblem } from './config-error';
import { envSchema, FILE_VARIABLES, type RawEnv, REPLACED_VARIABLES, SECRET_VARIABLES } from './env-schema';
import type { GatewayConfig, RedisSettings, RedisTopology, TracingSettings } from './gateway-config';
import { misspelledVariables } from './misspelled-variables';
import { isHttpsUrl, parseHostPorts } from './parsers';
import {
  checkProductionRules,
  checkRedisTls,
  isProduction,
  productionNote,
  redisUsesTls,
} from './production-rules';
import { readCaFile, readTlsClientFiles } from './tls-files';
import { allowedInsideTrusted } from './trust-proxy-coverage';

const SECRET_NAMES = new Set<string>(SECRET_VARIABLES);

export const DEFAULT_CLIENTS_FILE = 'config/clients.json';
export const LOCAL_CLIENTS_FILE = 'config/clients.local.json';

interface LoadOptions {
  /** Directory that relative paths (CLIENTS_FILE) resolve against; the working directory by default. */
  readonly cwd?: string;
}

/** Validates `env` and builds the gateway configuration, or throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv, options: LoadOptions = {}): GatewayConfig {
  const problems: ConfigProblem[] = [];
  const input = withFileSecrets(env, problems);
  for (const [variable, message] of Object.entries(REPLACED_VARIABLES))
    if (env[variable] !== undefined && env[variable] !== '') problems.push({ variable, message });
  // A misspelled USAGE_REDIS_* would leave the ledger and the quotas in the token store without a word.
  for (const prefix of ['SESSION_', 'USAGE_REDIS_'])
    for (const { variable, meant } of misspelledVariables(env, Object.keys(envSchema.shape), prefix))
      problems.push({ variable, message: `is not a variable of the gateway: did you mean ${meant}?` });
  const parsed = envSchema.safeParse(input);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const variable = String(issue.path[0] ?? 'environment');
      problems.push({ variable, message: SECRET_NAMES.has(variable) ? 'is invalid' : issue.message });
    }
    throw new ConfigError(problems);
  }
  const config = buildConfig(parsed.data, problems, options.cwd ?? process.cwd());
  if (problems.length > 0 || !config) throw new ConfigError(problems);
  return deepFreeze(config);
}

/** Fills NAME from the file that NAME_FILE names; both at once is ambiguous and refused. */
function withFileSecrets(
  env: NodeJS.ProcessEnv,
  problems: ConfigProblem[],
): Record<string, string | undefined> {
  const input: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(env))
    if (value !== '' && key in envSchema.shape) input[key] = value;
  for (const name of FILE_VARIABLES) {
    const file = input[`${name}_FILE`];
    if (!file) continue;
    if (input[name] !== undefined) {
      problems.push({ variable: name, message: `set both ${name} and ${name}_FILE; use one` });
      continue;
    }
    try {
      input[name] = readFileSync(file, 'utf8').trim();
    } catch {
      problems.push({ variable: `${name}_FILE`, message: 'names a file that cannot be read' });
    }
  }
  return input;
}

function buildConfig(env: RawEnv, problems: ConfigProblem[], cwd: string): GatewayConfig | undefined {
  const production = isProduction(env);
  const mode = env.UPSTREAM_BASE_URL || env.UPSTREAM_ACCOUNTS_FILE ? 'upstream' : 'local';
  const fail = (variable: string, message: string) => problems.push({ variable, message });
  const why = production ? productionNote(env) : '';

  if (mode === 'local' && production) {
    fail(
      'UPSTREAM_BASE_URL',
      'is required when NODE_ENV=production, or UPSTREAM_ACCOUNTS_FILE (local mode with the simulator is for development)',
    );
  }
  checkAccountsFileAlone(env, fail);
  if (env.UPSTREAM_BASE_URL !== undefined)
    checkUpstreamUrl(env.UPSTREAM_BASE_URL, env, production, why, fail);
  if (mode === 'upstream' && !env.UPSTREAM_ACCOUNTS_FILE) {
    if (!env.UPSTREAM_USERNAME) fail('UPSTREAM_USERNAME', 'is required (or UPSTREAM_USERNAME_FILE)');
    if (!env.UPSTREAM_PASSWORD) fail('UPSTREAM_PASSWORD', 'is required (or UPSTREAM_PASSWORD_FILE)');
  }

  const topology = redisTopology(env, fail);
  const usageTopology = usageRedisTopology(env, fail);
  const usesRedis = topology.kind !== 'none';
  if (production && usesRedis && !env.TOKEN_ENCRYPTION_KEY) {
    fail(
      'TOKEN_ENCRYPTION_KEY',
      `is required in production with Redis (the cached upstream tokens are encrypted)${why}`,
    );
  }
  if (production && !usesRedis && !env.ALLOW_MEMORY_STORE) {
    fail(
      'REDIS_URL',
      `is required in production (or REDIS_SENTINELS / REDIS_CLUSTER_NODES, or ALLOW_MEMORY_STORE=true)${why}`,
    );
  }
  if (env.TOKEN_LOGIN_MAX_INTERVAL_MS < env.TOKEN_LOGIN_MIN_INTERVAL_MS)
    fail('TOKEN_LOGIN_MAX_INTERVAL_MS', 'must be at least TOKEN_LOGIN_MIN_INTERVAL_MS');
  if (production) checkProductionRules(env, topology, fail);
  if (production) checkRedisTls(env, usageTopology, fail, 'USAGE_REDIS_');
  checkAllowListOutsideProxies(env, fail);
  if (env.METRICS_PORT !== undefined && env.METRICS_ON_MAIN_PORT)
    fail('METRICS_ON_MAIN_PORT', 'contradicts METRICS_PORT: set one of them');
  if (env.METRICS_PORT !== undefined && env.METRICS_PORT !== 0 && env.METRICS_PORT === env.PORT)
    fail(
      'METRICS_PORT',
      'must differ from PORT: /metrics gets a port of its own (or unset it and set METRICS_ON_MAIN_PORT=true)',
    );
  const redisTlsFiles = readTlsClientFiles(
    {
      caVariable: 'REDIS_TLS_CA_FILE',
      certVariable: 'REDIS_TLS_CERT_FILE',
      keyVariable: 'REDIS_TLS_KEY_FILE',
      caFile: env.REDIS_TLS_CA_FILE,
      certFile: env.REDIS_TLS_CERT_FILE,
      keyFile: env.REDIS_TLS_KEY_FILE,
    },
    fail,
  );
  const redisTlsFileSet = ['REDIS_TLS_CA_FILE', 'REDIS_TLS_CERT_FILE', 'REDIS_TLS_KEY_FILE'] as const;
  const redisTlsVariable = redisTlsFileSet.find((name) => env[name] !== undefined);
  if (
    redisTlsVariable &&
    !redisUsesTls(topology, env.REDIS_TLS) &&
    !redisUsesTls(usageTopology, env.REDIS_TLS)
  )
    fail(
      redisTlsVariable,
      topology.kind === 'none'
        ? 'is set without Redis: set REDIS_URL (rediss://), REDIS_SENTINELS or REDIS_CLUSTER_NODES'
        : 'is a TLS setting, but the Redis connection has no TLS: use a rediss:// REDIS_URL or REDIS_TLS=true',
    );
  /** REDIS_*'s password and TLS for a topology: the token store's, or the usage store's (USAGE_REDIS_*). */
  const redisSettings = (of: RedisTopology): RedisSettings => ({
    topology: of,
    password: env.REDIS_PASSWORD || undefined,
    sentinelPassword: env.REDIS_SENTINEL_PASSWORD || env.REDIS_PASSWORD || undefined,
    tls: env.REDIS_TLS,
    tlsFiles: redisTlsFiles,
    allowPlaintext: env.REDIS_ALLOW_PLAINTEXT,
    keyPrefix: env.REDIS_KEY_PREFIX,
    allowMemoryStore: env.ALLOW_MEMORY_STORE,
  });
  const upstreamCa = env.UPSTREAM_CA_FILE
    ? readCaFile('UPSTREAM_CA_FILE', env.UPSTREAM_CA_FILE, fail)
    : undefined;
  if ((env.OIDC_ISSUER === undefined) !== (env.OIDC_AUDIENCE === undefined)) {
    fail(env.OIDC_ISSUER ? 'OIDC_AUDIENCE' : 'OIDC_ISSUER', 'OIDC_ISSUER and OIDC_AUDIENCE go together');
  }
  if (env.OIDC_JWKS_URL && !env.OIDC_ISSUER) fail('OIDC_ISSUER', 'is required with OIDC_JWKS_URL');
  const badOrigin = env.CORS_ORIGINS.find((origin) => !/^https?:\/\/[^/\s]+$/.test(origin));
  if (badOrigin !== undefined)
    fail('CORS_ORIGINS', 'must be a comma list of origins like https://app.example.com');
  checkSessionSettings(env, mode, production, fail, why);
  checkQuotaWebhook(env, production, fail, why);
  const tracing = tracingSettings(env);
  if (tracing) {
    if (!env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) checkOtlpEndpoint(env.OTEL_EXPORTER_OTLP_ENDPOINT, fail);
    checkOtlpProtocol(env, fail);
    if (production) checkOtlpCredentialsEncrypted(env, tracing.tracesUrl, fail, why);
  }
  if (problems.length > 0) return undefined;

  const clientsFile = env.CLIENTS_FILE ?? (mode === 'local' ? LOCAL_CLIENTS_FILE : DEFAULT_CLIENTS_FILE);
  return {
    mode,
    production,
    server: {
      host: env.HOST ?? (mode === 'local' ? '127.0.0.1' : '0.0.0.0'),
      port: env.PORT,
      metricsPort: env.METRICS_PORT,
      metricsOnMainPort: env.METRICS_PORT === undefined,
      bodyLimitBytes: env.BODY_LIMIT_BYTES,
      headersTimeoutMs: env.SERVER_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: env.SERVER_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: env.SERVER_KEEP_ALIVE_TIMEOUT_MS,
      listenBacklog: env.SERVER_LISTEN_BACKLOG,
      acceptSockets: env.SERVER_ACCEPT_SOCKETS,
      shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS,
      trustProxy: env.TRUST_PROXY,
      inboundAllowCidrs: env.INBOUND_ALLOW_CIDRS,
      corsOrigins: env.CORS_ORIGINS,
    },
    log: { level: env.LOG_LEVEL, file: env.LOG_FILE },
    tracing: tracingSettings(env),
    upstream: {
      // Canonical (lower-case scheme and host, no default port or trailing slash): what every consumer compares.
      baseUrl: env.UPSTREAM_BASE_URL && new URL(env.UPSTREAM_BASE_URL).href.replace(/\/+$/, ''),
      accountsFile: env.UPSTREAM_ACCOUNTS_FILE && resolve(cwd, env.UPSTREAM_ACCOUNTS_FILE),
      allowHttp: env.UPSTREAM_ALLOW_HTTP,
      timeoutMs: env.UPSTREAM_TIMEOUT_MS,
      extraCa: upstreamCa,
      staticHeaders: env.UPSTREAM_STATIC_HEADERS,
      maxSockets: env.UPSTREAM_MAX_SOCKETS,
      queueTimeoutMs: env.UPSTREAM_QUEUE_TIMEOUT_MS,
      budget: {
        waitMs: env.UPSTREAM_BUDGET_WAIT_MS,
        retryAfterMaxSeconds: env.UPSTREAM_RETRY_AFTER_MAX_SECONDS,
      },
      circuit: {
        failureRatio: env.CIRCUIT_FAILURE_RATIO,
        windowMs: env.CIRCUIT_WINDOW_MS,
        minimumCalls: env.CIRCUIT_MINIMUM_CALLS,
        resetMs: env.CIRCUIT_RESET_MS,
      },
      planCacheTtlSeconds: env.PLAN_CACHE_TTL_SECONDS,
      idempotencyTtlSeconds: env.IDEMPOTENCY_TTL_SECONDS,
    },
    credentials: {
      username: env.UPSTREAM_USERNAME,
      password: env.UPSTREAM_PASSWORD,
      usernameFile: env.UPSTREAM_USERNAME_FILE,
      passwordFile: env.UPSTREAM_PASSWORD_FILE,
    },
    tokens: {
      refreshSkewSeconds: env.TOKEN_REFRESH_SKEW_SECONDS,
      encryptionKey: env.TOKEN_ENCRYPTION_KEY,
      lockTtlMs: env.TOKEN_LOCK_TTL_MS,
      lockWaitMs: env.TOKEN_LOCK_WAIT_MS,
      loginMinIntervalMs: env.TOKEN_LOGIN_MIN_INTERVAL_MS,
      loginMaxIntervalMs: env.TOKEN_LOGIN_MAX_INTERVAL_MS,
    },
    redis: redisSettings(topology),
    callers: {
      clientsFile: resolve(cwd, clientsFile),
      operationsFile: resolve(cwd, env.OPERATIONS_FILE),
      defaultRateLimit: {
        limit: env.RATE_LIMIT_DEFAULT_LIMIT,
        windowSeconds: env.RATE_LIMIT_DEFAULT_WINDOW_SECONDS,
      },
      authFailureLimit: {
        limit: env.AUTH_FAILURE_LIMIT,
        windowSeconds: env.AUTH_FAILURE_WINDOW_SECONDS,
      },
      oidc:
        env.OIDC_ISSUER && env.OIDC_AUDIENCE
          ? {
              issuer: env.OIDC_ISSUER,
              audience: env.OIDC_AUDIENCE,
              jwksUrl: env.OIDC_JWKS_URL,
              clockToleranceSeconds: env.OIDC_CLOCK_TOLERANCE_SECONDS,
              accessTokenTypes: env.OIDC_ACCESS_TOKEN_TYPES,
            }
          : undefined,
    },
    sessions: sessionSettings(env, mode),
    usage: {
      ...(usageTopology.kind !== 'none' && { redis: redisSettings(usageTopology) }),
      retentionDays: env.USAGE_RETENTION_DAYS,
      webhook:
        env.QUOTA_WEBHOOK_URL && env.QUOTA_WEBHOOK_SECRET
          ? { url: env.QUOTA_WEBHOOK_URL, secret: env.QUOTA_WEBHOOK_SECRET }
          : undefined,
    },
  };
}

/**
 * A caller inside a TRUST_PROXY range is believed when it writes X-Forwarded-For, so an INBOUND_ALLOW_CIDRS that
 * shares addresses with those ranges can be walked around: with TRUST_PROXY=10.0.0.0/8 and
 * INBOUND_ALLOW_CIDRS=10.1.0.0/16, a caller at 10.2.3.4 writes `X-Forwarded-For: 10.1.0.5` (issue 42). Refused in
 * every mode: the proxies are named by their exact addresses, and no caller is one of them.
 */
function checkAllowListOutsideProxies(env: RawEnv, fail: (variable: string, message: string) => void) {
  if (!Array.isArray(env.TRUST_PROXY)) return;
  const inside = allowedInsideTrusted(env.TRUST_PROXY, env.INBOUND_ALLOW_CIDRS);
  if (inside.length > 0)
    fail(
      'INBOUND_ALLOW_CIDRS',
      `${inside.join(', ')} overlaps the TRUST_PROXY ranges: a caller there is trusted as a proxy, writes its own X-Forwarded-For and claims any allowed address. Set TRUST_PROXY to the proxies' exact addresses (e.g. 10.0.4.7,10.0.4.8) or the hop count of the real chain, and keep callers out of it`,
    );
}

/** QUOTA_WEBHOOK_URL: signed, so its key is required; https in production (the body names clients and quotas). */
function checkQuotaWebhook(
  env: RawEnv,
  production: boolean,
  fail: (variable: string, message: string) => void,
  why: string,
) {
  if (env.QUOTA_WEBHOOK_URL === undefined) return;
  if (!env.QUOTA_WEBHOOK_SECRET)
    fail('QUOTA_WEBHOOK_SECRET', 'is required with QUOTA_WEBHOOK_URL (or QUOTA_WEBHOOK_SECRET_FILE)');
  if (production && !env.QUOTA_WEBHOOK_URL.startsWith('https:'))
    fail('QUOTA_WEBHOOK_URL', `must be https in production${why}`);
}

/** The development client of local mode, registered with the development identity provider. */
const LOCAL_SESSION_CLIENT_ID = 'local-web-app';

/**
 * UPSTREAM_BASE_URL: https (unless allowed for tests), and the provider's base only (scheme, host, port, path). A user
 * or password in it would never reach the provider (the token client refuses such a URL: every login "unavailable")
 * and a query or fragment would end up inside every upstream path. The value is never echoed: it may hold a secret.
 */
function checkUpstreamUrl(
  raw: string,
  env: RawEnv,
  production: boolean,
  why: string,
  fail: (variable: string, message: string) => void,
) {
  const url = new URL(raw);
  if (url.protocol !== 'https:') {
    if (production) fail('UPSTREAM_BASE_URL', `must be https in production${why}`);
    else if (!env.UPSTREAM_ALLOW_HTTP)
      fail('UPSTREAM_BASE_URL', 'must be https (set UPSTREAM_ALLOW_HTTP=true for tests)');
  }
  // '?' and '#' read from the text: an empty query or fragment leaves no trace in the parsed URL.
  if (url.username || url.password || raw.includes('?') || raw.includes('#'))
    fail(
      'UPSTREAM_BASE_URL',
      "must be the provider's base URL only (scheme, host, port, path), without user, password, query or fragment: the credentials are UPSTREAM_USERNAME and UPSTREAM_PASSWORD",
    );
}

/**
 * The single-account variables describe one account; the accounts file describes each account itself (SPEC §10).
 * Both at once would leave it unclear which one a caller gets: refused, naming every variable to remove.
 */
function checkAccountsFileAlone(env: RawEnv, fail: (variable: string, message: string) => void): void {
  if (!env.UPSTREAM_ACCOUNTS_FILE) return;
  for (const variable of SINGLE_ACCOUNT_VARIABLES)
    if (
      env[variable] !== undefined &&
      !(variable === 'UPSTREAM_STATIC_HEADERS' && isEmpty(env[variable])) &&
      // A secret read from its *_FILE is named once, by the *_FILE variable.
      !((variable === 'UPSTREAM_USERNAME' || variable === 'UPSTREAM_PASSWORD') && env[`${variable}_FILE`])
    )
      fail(
        variable,
        'is a single-account variable and UPSTREAM_ACCOUNTS_FILE is set: describe each account in the accounts file (baseUrl, usernameFile, passwordFile, caFile, staticHeaders) and remove this variable',
      );
}

const SINGLE_ACCOUNT_VARIABLES = [
  'UPSTREAM_BASE_URL',
  'UPSTREAM_USERNAME',
  'UPSTREAM_PASSWORD',
  'UPSTREAM_USERNAME_FILE',
  'UPSTREAM_PASSWORD_FILE',
  'UPSTREAM_CA_FILE',
  'UPSTREAM_STATIC_HEADERS',
] as const;

const isEmpty = (value: unknown) =>
  typeof value === 'object' && value !== null && Object.keys(value).length === 0;

function checkSessionSettings(
  env: RawEnv,
  mode: 'local' | 'upstream',
  production: boolean,
  fail: (variable: string, message: string) => void,
  why: string,
): void {
  if (!env.SESSION_ISSUER) {
    for (const variable of ['SESSION_CLIENT_ID', 'SESSION_CLIENT_SECRET', 'SESSION_PUBLIC_URL'] as const)
      if (env[variable] !== undefined && mode === 'upstream')
        fail('SESSION_ISSUER', `is required with ${variable}`);
    return;
  }
  if (!env.SESSION_CLIENT_ID) fail('SESSION_CLIENT_ID', 'is required with SESSION_ISSUER');
  if (!env.SESSION_CLIENT_SECRET)
    fail('SESSION_CLIENT_SECRET', 'is required with SESSION_ISSUER (or SESSION_CLIENT_SECRET_FILE)');
  if (!env.SESSION_PUBLIC_URL)
    fail('SESSION_PUBLIC_URL', 'is required with SESSION_ISSUER (the origin browsers reach the gateway on)');
  else if (!isBareOrigin(env.SESSION_PUBLIC_URL))
    fail(
      'SESSION_PUBLIC_URL',
      "must be an origin like https://bff.example.com, without path, query or user: /bff/* and the __Host- session cookie live at the root of the gateway's own origin",
    );
  if (production) {
    if (!isHttpsUrl(env.SESSION_ISSUER)) fail('SESSION_ISSUER', `must be https in production${why}`);
    if (env.SESSION_PUBLIC_URL && !isHttpsUrl(env.SESSION_PUBLIC_URL))
      fail('SESSION_PUBLIC_URL', `must be https in production (the session cookie is Secure)${why}`);
  }
  if (env.SESSION_IDLE_TIMEOUT_SECONDS > env.SESSION_MAX_LIFETIME_SECONDS)
    fail('SESSION_IDLE_TIMEOUT_SECONDS', 'must not exceed SESSION_MAX_LIFETIME_SECONDS');
  if (!env.SESSION_SCOPES.split(/\s+/).includes('openid')) fail('SESSION_SCOPES', 'must include openid');
}

/** Scheme, host and port only (a trailing slash allowed): what the browser sends as Origin. */
function isBareOrigin(value: string): boolean {
  const url = new URL(value);
  return (
    url.pathname === '/' && !value.includes('?') && !value.includes('#') && !url.username && !url.password
  );
}

function sessionSettings(env: RawEnv, mode: 'local' | 'upstream'): GatewayConfig['sessions'] {
  if (!env.SESSION_ISSUER && mode === 'upstream') return undefined;
  return {
    issuer: env.SESSION_ISSUER,
    clientId: env.SESSION_CLIENT_ID ?? LOCAL_SESSION_CLIENT_ID,
    clientSecret: env.SESSION_CLIENT_SECRET,
    publicUrl: env.SESSION_PUBLIC_URL && new URL(env.SESSION_PUBLIC_URL).origin,
    scopes: env.SESSION_SCOPES,
    clientAuthMethod: env.SESSION_CLIENT_AUTH_METHOD,
    endSessionMethod: env.SESSION_END_SESSION_METHOD,
    idleTimeoutSeconds: env.SESSION_IDLE_TIMEOUT_SECONDS,
    maxLifetimeSeconds: env.SESSION_MAX_LIFETIME_SECONDS,
    revalidateSeconds: env.SESSION_REVALIDATE_SECONDS,
  };
}

/** Traces are off unless an OTLP endpoint is set, as the OpenTelemetry SDKs do; OTEL_SDK_DISABLED turns them off. */
function tracingSettings(env: RawEnv): TracingSettings | undefined {
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracesUrl =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base && `${base.replace(/\/+$/, '')}/v1/traces`);
  if (!tracesUrl || env.OTEL_SDK_DISABLED || env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  return {
    tracesUrl,
    serviceName: env.OTEL_SERVICE_NAME,
    sampler: env.OTEL_TRACES_SAMPLER,
    samplerRatio: env.OTEL_TRACES_SAMPLER_ARG,
    exportDelayMs: env.OTEL_BSP_SCHEDULE_DELAY,
    propagateUpstream: env.UPSTREAM_PROPAGATE_TRACE,
  };
}

/** The general endpoint gets /v1/traces appended: one that ends in it, or has a query or fragment, would go nowhere. */
function checkOtlpEndpoint(endpoint: string | undefined, fail: (variable: string, message: string) => void) {
  if (!endpoint) return;
  const url = new URL(endpoint);
  if (url.search || url.hash)
    fail(
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'must have no query string or fragment (/v1/traces is appended to it)',
    );
  else if (/\/v1\/traces\/*$/.test(url.pathname))
    fail(
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'ends in /v1/traces, which the gateway appends: drop it, or give the full URL as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    );
}

/**
 * Production sends the collector's credentials (OTLP headers, or a user and password in the URL) over https only,
 * or to a loopback sidecar; spans alone hold no secret, so plain http to an in-cluster collector stays allowed.
 */
function checkOtlpCredentialsEncrypted(
  env: RawEnv,
  tracesUrl: string,
  fail: (variable: string, message: string) => void,
  why: string,
) {
  const url = new URL(tracesUrl);
  if (url.protocol !== 'http:' || LOOPBACK_HOSTS.has(url.hostname)) return;
  const headers = env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? env.OTEL_EXPORTER_OTLP_HEADERS;
  if (headers === undefined && !url.username && !url.password) return;
  fail(
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
      ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
      : 'OTEL_EXPORTER_OTLP_ENDPOINT',
    `must be https in production when the collector gets credentials (OTLP headers or a user in the URL)${why}`,
  );
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Either HTTP encoding is accepted (the exporter sends JSON, which every OTLP/HTTP receiver reads); grpc is not. */
function checkOtlpProtocol(env: RawEnv, fail: (variable: string, message: string) => void) {
  const variable =
    env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL !== undefined
      ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = env[variable];
  if (protocol !== undefined && protocol !== 'http/protobuf' && protocol !== 'http/json')
    fail(
      variable,
      'must be http/protobuf or http/json: the gateway exports OTLP over HTTP (grpc is not supported)',
    );
}

/** UPSTREAM_CA_FILE: read once at start; every PEM certificate in it must parse. */
function redisTopology(env: RawEnv, fail: (variable: string, message: string) => void): RedisTopology {
  // The Sentinels' password serves USAGE_REDIS_SENTINELS as well (the usage store takes REDIS_*'s secrets).
  if (
    env.REDIS_SENTINEL_PASSWORD !== undefined &&
    !env.REDIS_SENTINELS?.length &&
    !env.USAGE_REDIS_SENTINELS?.length
  )
    fail(
      'REDIS_SENTINEL_PASSWORD',
      'is read with REDIS_SENTINELS or USAGE_REDIS_SENTINELS only (the other topologies use REDIS_PASSWORD)',
    );
  return topologyOf(
    'REDIS_',
    {
      url: env.REDIS_URL,
      sentinels: env.REDIS_SENTINELS,
      sentinelName: env.REDIS_SENTINEL_NAME,
      clusterNodes: env.REDIS_CLUSTER_NODES,
    },
    fail,
  );
}

/** USAGE_REDIS_*: the same three forms as REDIS_*, for the ledger and the quota counters alone. */
function usageRedisTopology(env: RawEnv, fail: (variable: string, message: string) => void): RedisTopology {
  if (env.USAGE_REDIS_SENTINEL_NAME !== undefined && !env.USAGE_REDIS_SENTINELS?.length)
    fail(
      'USAGE_REDIS_SENTINEL_NAME',
      'is read with USAGE_REDIS_SENTINELS only: without them the ledger and the quotas would stay in the token store',
    );
  return topologyOf(
    'USAGE_REDIS_',
    {
      url: env.USAGE_REDIS_URL,
      sentinels: env.USAGE_REDIS_SENTINELS,
      sentinelName: env.USAGE_REDIS_SENTINEL_NAME,
      clusterNodes: env.USAGE_REDIS_CLUSTER_NODES,
    },
    fail,
  );
}

interface TopologyVariables {
  readonly url?: string;
  readonly sentinels?: readonly string[];
  readonly sentinelName?: string;
  readonly clusterNodes?: readonly string[];
}

/** One of a URL, Sentinels (with the master's name) or Cluster nodes, named `<prefix>URL` and so on. */
function topologyOf(
  prefix: string,
  set: TopologyVariables,
  fail: (variable: string, message: string) => void,
): RedisTopology {
  const chosen = [
    set.url && `${prefix}URL`,
    set.sentinels?.length && `${prefix}SENTINELS`,
    set.clusterNodes?.length && `${prefix}CLUSTER_NODES`,
  ].filter(Boolean);
  if (chosen.length > 1) {
    fail(String(chosen[1]), `choose one Redis topology (${chosen.join(', ')} are all set)`);
    return { kind: 'none' };
  }
  if (set.url) return { kind: 'standalone', url: set.url };
  if (set.sentinels?.length) {
    if (!set.sentinelName) fail(`${prefix}SENTINEL_NAME`, `is required with ${prefix}SENTINELS`);
    return {
      kind: 'sentinel',
      sentinels: parseHostPorts(set.sentinels),
      name: set.sentinelName ?? '',
    };
  }
  if (set.clusterNodes?.length) return { kind: 'cluster', nodes: parseHostPorts(set.clusterNodes) };
  return { kind: 'none' };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Buffer.isBuffer(value) && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
