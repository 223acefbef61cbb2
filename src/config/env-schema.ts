// The gateway's environment variables: one schema, their defaults and which of them are secrets.
import { z } from 'zod';
import { isCidr, parseEncryptionKey, parseStaticHeaders, parseTrustProxy } from './parsers';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
/** Upstream sockets per replica (bench/README.md, "Sizing the upstream pool": sized from the slow-upstream benchmark). */
export const DEFAULT_UPSTREAM_MAX_SOCKETS = 1024;
/**
 * Connections the kernel may hold for the gateway before it accepts them (Node's own default is 511). A burst of new
 * connections beyond it (a fleet reconnecting after a deploy, a balancer opening its pool) is not refused: the last
 * handshake step is dropped and the caller waits for the kernel's retransmission, 1 s, then 3 s, 7 s. Linux caps it
 * at net.core.somaxconn (4096 by default since 5.4).
 */
export const DEFAULT_SERVER_LISTEN_BACKLOG = 4096;
/** Listening sockets on the gateway's port (SO_REUSEPORT): connections accepted per event-loop turn at most. */
export const DEFAULT_SERVER_ACCEPT_SOCKETS = 16;
/** The longest lease TOKEN_LOCK_TTL_MS may give the fleet's token lock: a longer one in Redis is no replica's. */
export const MAX_TOKEN_LOCK_TTL_MS = 120_000;
/**
 * Numbers are plain decimal digits, nothing else: `0x10`, `1e3`, `010`, `+5`, `5.0`, ` 5` and `10_000` are refused
 * with one message, because each has a second reading (hex, octal, a typo's blank read as 0) an operator did not
 * mean. Ratios (the few variables documented as fractions) also take a decimal point: `0.5`, `1`, never `.5` or `5e-1`.
 */
const PLAIN_INTEGER = /^(0|[1-9][0-9]*)$/;
const PLAIN_DECIMAL = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;
export const NOT_PLAIN_INTEGER = 'must be a number in plain decimal digits, like 5000';
export const NOT_PLAIN_DECIMAL = 'must be a number in plain decimal digits, like 0.5';
const int = (min: number, max: number) =>
  z.string().regex(PLAIN_INTEGER, NOT_PLAIN_INTEGER).transform(Number).pipe(z.number().min(min).max(max));
/** A fraction from 0 to 1 as a ratio variable writes it. */
const ratio = z.string().regex(PLAIN_DECIMAL, NOT_PLAIN_DECIMAL).transform(Number);
const list = z.string().transform((v) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
);
/** A string parsed by `parse`; its thrown message becomes the variable's problem. */
const parsed = <T>(parse: (raw: string) => T) =>
  z.string().transform((raw, ctx): T => {
    try {
      return parse(raw);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });
/** A port as plain digits (no leading zero) up to 65535, as every numeric variable is written. */
const hostPort = z
  .string()
  .regex(/^[^\s:,]+:([1-9][0-9]{0,4})$/, 'must be host:port')
  .refine((entry) => Number(entry.slice(entry.lastIndexOf(':') + 1)) <= 65535, 'must be host:port');

/** Variables whose values must never be printed, logged or echoed in an error. */
export const SECRET_VARIABLES = [
  'UPSTREAM_USERNAME',
  'UPSTREAM_PASSWORD',
  'TOKEN_ENCRYPTION_KEY',
  'REDIS_PASSWORD',
  'REDIS_SENTINEL_PASSWORD',
  'SESSION_CLIENT_SECRET',
  'QUOTA_WEBHOOK_SECRET',
] as const;

/** Secrets that may also be given as a path to a file (`<NAME>_FILE`), e.g. a Kubernetes or Docker secret mount. */
export const FILE_VARIABLES = SECRET_VARIABLES;

/** Variables that no longer exist: setting one is a configuration error that names its replacement. */
export const REPLACED_VARIABLES: Readonly<Record<string, string>> = {
  CIRCUIT_FAILURE_THRESHOLD:
    'was replaced: circuits now open on a failure ratio; use CIRCUIT_FAILURE_RATIO, CIRCUIT_WINDOW_MS and CIRCUIT_MINIMUM_CALLS',
};

export const envSchema = z.object({
  /** Unset with UPSTREAM_BASE_URL counts as production (secure by default; see production-rules.ts). */
  NODE_ENV: z.enum(['development', 'production', 'test']).optional(),
  /** Default: 0.0.0.0, or 127.0.0.1 in local mode (a development key must not be reachable from the network). */
  HOST: z.string().min(1).optional(),
  PORT: int(0, 65535).default(8080),
  METRICS_PORT: int(0, 65535).optional(),
  /** Production serves /metrics on PORT only when this says so (otherwise METRICS_PORT is required). */
  METRICS_ON_MAIN_PORT: bool.default(false),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FILE: z.string().min(1).optional(),
  /** OpenTelemetry traces: on when one of the two endpoints is set (the exporter reads its other OTEL_EXPORTER_OTLP_*). */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z
    .url({ protocol: /^https?$/, message: 'must be an http(s) URL' })
    .optional(),
  /** `none` turns traces off (the standard switch when the endpoint is shared with other signals). */
  OTEL_TRACES_EXPORTER: z
    .enum(['otlp', 'none'], { message: 'must be otlp or none (the gateway exports OTLP over HTTP)' })
    .default('otlp'),
  /** Checked only when traces are on (load-config.ts): the traces one wins, as in every OpenTelemetry SDK. */
  OTEL_EXPORTER_OTLP_PROTOCOL: z.string().optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.string().optional(),
  /** Read by the exporter itself; here only whether it is set (credentials that production sends over https only). */
  OTEL_EXPORTER_OTLP_HEADERS: z.string().optional(),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: z.string().optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default('payments-bff-gateway'),
  OTEL_SDK_DISABLED: bool.default(false),
  OTEL_TRACES_SAMPLER: z
    .enum([
      'always_on',
      'always_off',
      'traceidratio',
      'parentbased_always_on',
      'parentbased_always_off',
      'parentbased_traceidratio',
    ])
    .default('parentbased_always_on'),
  OTEL_TRACES_SAMPLER_ARG: ratio.pipe(z.number().min(0).max(1)).default(1),
  OTEL_BSP_SCHEDULE_DELAY: int(1, 600_000).default(5_000),

  TRUST_PROXY: parsed(parseTrustProxy).default(false),
  INBOUND_ALLOW_CIDRS: list
    .refine((entries) => entries.every(isCidr), 'must be a comma list of CIDRs or addresses')
    .default([]),
  CORS_ORIGINS: list.default([]),
  BODY_LIMIT_BYTES: int(64, 1024 * 1024).default(16 * 1024),
  SERVER_HEADERS_TIMEOUT_MS: int(1000, 120_000).default(10_000),
  SERVER_REQUEST_TIMEOUT_MS: int(1000, 300_000).default(30_000),
  /**
   * How long an idle client connection stays open. Longer than the idle timeout of whatever sits in front (60 s for
   * nginx's upstream keepalive_timeout and AWS ALB): the proxy must close an idle connection first, or it reuses one
   * the gateway is closing and the request fails with 502. Node >= 18 counts headersTimeout from a request's first
   * byte, not across idle time, so it need not exceed this.
   */
  SERVER_KEEP_ALIVE_TIMEOUT_MS: int(1000, 600_000).default(65_000),
  SERVER_LISTEN_BACKLOG: int(1, 65_535).default(DEFAULT_SERVER_LISTEN_BACKLOG),
  SERVER_ACCEPT_SOCKETS: int(1, 64).default(DEFAULT_SERVER_ACCEPT_SOCKETS),
  SHUTDOWN_TIMEOUT_MS: int(0, 120_000).default(15_000),

  /** Read in canonical form by load-config (scheme and host lower-case): HTTP:// meets the https rule as http. */
  UPSTREAM_BASE_URL: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  UPSTREAM_ALLOW_HTTP: bool.default(false),
  /** The provider accounts file (SPEC §10); replaces UPSTREAM_BASE_URL and the credential variables. */
  UPSTREAM_ACCOUNTS_FILE: z.string().min(1).optional(),
  UPSTREAM_USERNAME: z.string().min(1).optional(),
  UPSTREAM_PASSWORD: z.string().min(1).optional(),
  UPSTREAM_USERNAME_FILE: z.string().min(1).optional(),
  UPSTREAM_PASSWORD_FILE: z.string().min(1).optional(),
  /** PEM file of extra CAs trusted for the upstream, on top of the default roots. */
  UPSTREAM_CA_FILE: z.string().min(1).optional(),
  UPSTREAM_TIMEOUT_MS: int(100, 120_000).default(10_000),
  UPSTREAM_STATIC_HEADERS: parsed(parseStaticHeaders).default({}),
  UPSTREAM_MAX_SOCKETS: int(1, 10_000).default(DEFAULT_UPSTREAM_MAX_SOCKETS),
  /** Send the W3C traceparent to the provider (off: the provider learns nothing of the callers' traces). */
  UPSTREAM_PROPAGATE_TRACE: bool.default(false),
  UPSTREAM_QUEUE_TIMEOUT_MS: int(0, 60_000).default(1_000),
  /** Longest wait for room in an account's provider budget before 429 UPSTREAM_BUDGET_EXHAUSTED (0: never wait). */
  UPSTREAM_BUDGET_WAIT_MS: int(0, 10_000).default(250),
  /** The longest pause a provider's 429 Retry-After may impose on an account (longer values are capped, logged). */
  UPSTREAM_RETRY_AFTER_MAX_SECONDS: int(1, 3600).default(120),
  CIRCUIT_FAILURE_RATIO: ratio
    .pipe(z.number().gt(0, 'must be above 0 and below 1').lt(1, 'must be above 0 and below 1'))
    .default(0.5),
  CIRCUIT_WINDOW_MS: int(1000, 600_000).default(10_000),
  CIRCUIT_MINIMUM_CALLS: int(1, 100_000).default(20),
  CIRCUIT_RESET_MS: int(100, 600_000).default(10_000),
  PLAN_CACHE_TTL_SECONDS: int(0, 3600).default(0),
  /** How long an Idempotency-Key's claim and kept answer last (SPEC §13). */
  IDEMPOTENCY_TTL_SECONDS: int(60, 30 * 86_400).default(86_400),

  TOKEN_REFRESH_SKEW_SECONDS: int(1, 3600).default(60),
  TOKEN_ENCRYPTION_KEY: parsed(parseEncryptionKey).optional(),
  TOKEN_ENCRYPTION_KEY_FILE: z.string().min(1).optional(),
  TOKEN_LOCK_TTL_MS: int(1000, MAX_TOKEN_LOCK_TTL_MS).default(15_000),
  TOKEN_LOCK_WAIT_MS: int(100, 120_000).default(5_000),
  TOKEN_LOGIN_MIN_INTERVAL_MS: int(0, 3_600_000).default(20_000),
  TOKEN_LOGIN_MAX_INTERVAL_MS: int(0, 86_400_000).default(900_000),

  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\/\S+$/, 'must be a redis:// or rediss:// URL')
    .optional(),
  REDIS_SENTINELS: list.pipe(z.array(hostPort)).optional(),
  REDIS_SENTINEL_NAME: z.string().min(1).optional(),
  REDIS_CLUSTER_NODES: list.pipe(z.array(hostPort)).optional(),
  REDIS_PASSWORD: z.string().optional(),
  REDIS_PASSWORD_FILE: z.string().min(1).optional(),
  /** The Sentinels' own password (their requirepass) when it is not REDIS_PASSWORD; default: REDIS_PASSWORD. */
  REDIS_SENTINEL_PASSWORD: z.string().optional(),
  REDIS_SENTINEL_PASSWORD_FILE: z.string().min(1).optional(),
  REDIS_TLS: bool.default(false),
  /** Mutual TLS (Bitnami's tls.authClients, managed Redis): the client certificate and key, PEM files. */
  REDIS_TLS_CERT_FILE: z.string().min(1).optional(),
  REDIS_TLS_KEY_FILE: z.string().min(1).optional(),
  /** PEM file of extra CAs trusted for Redis (and its Sentinels), on top of the default roots. */
  REDIS_TLS_CA_FILE: z.string().min(1).optional(),
  /** Production refuses Redis without TLS unless this says so (e.g. a private, policed network). */
  REDIS_ALLOW_PLAINTEXT: bool.default(false),
  REDIS_KEY_PREFIX: z.string().default('bff:'),
  /**
   * A durable Redis of its own for the usage ledger and the quota counters (docs/usage.md): one of the three forms,
   * as for REDIS_*; password and TLS settings are REDIS_*'s (a URL may carry its own password).
   */
  USAGE_REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\/\S+$/, 'must be a redis:// or rediss:// URL')
    .optional(),
  USAGE_REDIS_SENTINELS: list.pipe(z.array(hostPort)).optional(),
  USAGE_REDIS_SENTINEL_NAME: z.string().min(1).optional(),
  USAGE_REDIS_CLUSTER_NODES: list.pipe(z.array(hostPort)).optional(),
  ALLOW_MEMORY_STORE: bool.default(false),

  CLIENTS_FILE: z.string().min(1).optional(),
  /** SPEC §12: the operations catalogue (OpenAPI 3.1, JSON or YAML). */
  OPERATIONS_FILE: z.string().min(1).default('config/operations.json'),
  RATE_LIMIT_DEFAULT_LIMIT: int(1, 1_000_000).default(600),
  RATE_LIMIT_DEFAULT_WINDOW_SECONDS: int(1, 86_400).default(60),
  AUTH_FAILURE_LIMIT: int(1, 1_000_000).default(20),
  AUTH_FAILURE_WINDOW_SECONDS: int(1, 86_400).default(300),
  OIDC_ISSUER: z.url().optional(),
  OIDC_AUDIENCE: z.string().min(1).optional(),
  OIDC_JWKS_URL: z.url().optional(),
  OIDC_CLOCK_TOLERANCE_SECONDS: int(0, 300).default(30),
  /**
   * The `typ` header values of an access token (RFC 9068: `at+jwt`), compared case-insensitively without an
   * `application/` prefix. A token that names another type (an ID token's `JWT`) is refused; one with no `typ` passes.
   */
  OIDC_ACCESS_TOKEN_TYPES: list
    .transform((types) => types.map((type) => type.toLowerCase().replace(/^application\//, '')))
    .refine(
      (types) =>
        types.length > 0 && types.every((type) => /^[a-z0-9!#$&^_.+-]+(\/[a-z0-9!#$&^_.+-]+)?$/.test(type)),
      'must be a comma list of media types such as at+jwt',
    )
    .default(['at+jwt']),

  /** Browser sessions (src/sessions): the provider web apps log in at; local mode starts a development one. */
  SESSION_ISSUER: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  SESSION_CLIENT_ID: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be a registry client id')
    .optional(),
  SESSION_CLIENT_SECRET: z.string().min(1).optional(),
  SESSION_CLIENT_SECRET_FILE: z.string().min(1).optional(),
  /** The gateway's public origin as browsers reach it: the callback URL and the one allowed Origin. */
  SESSION_PUBLIC_URL: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  SESSION_SCOPES: z.string().min(1).default('openid profile email'),
  /** How the gateway authenticates at the provider's token endpoint; unset: chosen from the provider's discovery. */
  SESSION_CLIENT_AUTH_METHOD: z
    .enum(['client_secret_basic', 'client_secret_post'], {
      message: "must be client_secret_basic or client_secret_post (unset: the provider's discovery chooses)",
    })
    .optional(),
  /**
   * How the browser is sent to the provider's end-session endpoint: `get` (a link carrying id_token_hint, which every
   * provider takes) or `post` (a form, the ID token kept out of URLs: only for a provider that takes POST there).
   */
  SESSION_END_SESSION_METHOD: z
    .enum(['get', 'post'], {
      message:
        'must be get or post (get: a link with id_token_hint; post: a form, for providers that take POST)',
    })
    .default('get'),
  SESSION_IDLE_TIMEOUT_SECONDS: int(60, 86_400).default(1800),
  SESSION_MAX_LIFETIME_SECONDS: int(300, 30 * 86_400).default(43_200),
  SESSION_REVALIDATE_SECONDS: int(5, 86_400).default(300),

  /** Usage ledger and quotas (src/usage). */
  USAGE_RETENTION_DAYS: int(1, 3650).default(400),
  QUOTA_WEBHOOK_URL: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  /** The HMAC key signing each webhook call; required with QUOTA_WEBHOOK_URL. */
  QUOTA_WEBHOOK_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  QUOTA_WEBHOOK_SECRET_FILE: z.string().min(1).optional(),
});

export type RawEnv = z.infer<typeof envSchema>;
