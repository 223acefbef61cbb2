// The typed, frozen configuration every other module receives; built once at start by loadConfig().

import type { TrustProxySetting } from './parsers';
import type { TlsClientFiles } from './tls-files';

export type GatewayMode = 'local' | 'upstream';

export type RedisTopology =
  | { kind: 'none' }
  | { kind: 'standalone'; url: string }
  | { kind: 'sentinel'; sentinels: { host: string; port: number }[]; name: string }
  | { kind: 'cluster'; nodes: { host: string; port: number }[] };

/** Where a Redis is and how to reach it (REDIS_*; the usage store's topology comes from USAGE_REDIS_*). */
export interface RedisSettings {
  readonly topology: RedisTopology;
  readonly password?: string;
  /** What the Sentinels are asked with: REDIS_SENTINEL_PASSWORD, else REDIS_PASSWORD (Bitnami: one for both). */
  readonly sentinelPassword?: string;
  readonly tls: boolean;
  /** REDIS_TLS_CA_FILE (on top of Node's roots), REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE, read at start. */
  readonly tlsFiles?: TlsClientFiles;
  /** REDIS_ALLOW_PLAINTEXT: production accepts Redis without TLS. */
  readonly allowPlaintext?: boolean;
  readonly keyPrefix: string;
  readonly allowMemoryStore: boolean;
}

export interface CredentialSettings {
  /** Inline values (UPSTREAM_USERNAME / UPSTREAM_PASSWORD), used when no file is configured. */
  readonly username?: string;
  readonly password?: string;
  /** Files re-read on change and on SIGHUP (UPSTREAM_USERNAME_FILE / UPSTREAM_PASSWORD_FILE). */
  readonly usernameFile?: string;
  readonly passwordFile?: string;
}

/** A per-operation circuit breaker: a failure ratio over a sliding window with a minimum of calls. */
export interface CircuitSettings {
  /** Share of failed calls (0..1, exclusive) over the window that opens the circuit. */
  readonly failureRatio: number;
  /** Length of the sliding window. */
  readonly windowMs: number;
  /** Calls the window must hold before the ratio can open the circuit: a few failures alone never do. */
  readonly minimumCalls: number;
  /** How long an open circuit answers without calling before one probe decides. */
  readonly resetMs: number;
}

export interface OidcSettings {
  readonly issuer: string;
  readonly audience: string;
  readonly jwksUrl?: string;
  readonly clockToleranceSeconds: number;
  /** `typ` header values an access token may carry (lower case, no `application/`); OIDC_ACCESS_TOKEN_TYPES. */
  readonly accessTokenTypes: readonly string[];
}

export interface TracingSettings {
  /** The OTLP/HTTP traces URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces). */
  readonly tracesUrl: string;
  readonly serviceName: string;
  readonly sampler: string;
  readonly samplerRatio: number;
  /** OTEL_BSP_SCHEDULE_DELAY: how long finished spans wait to be exported in one batch. */
  readonly exportDelayMs: number;
  /** UPSTREAM_PROPAGATE_TRACE: the provider gets a traceparent header. */
  readonly propagateUpstream: boolean;
}

/** Browser sessions (BFF login): the relying party's settings and the session lifetimes. */
export interface SessionSettings {
  /** Absent in local mode: the development identity provider is started and its URL filled in. */
  readonly issuer?: string;
  readonly clientId: string;
  readonly clientSecret?: string;
  /** The gateway's public origin; absent in local mode (the gateway's own URL). */
  readonly publicUrl?: string;
  readonly scopes: string;
  /** SESSION_CLIENT_AUTH_METHOD; unset: the provider's discovery chooses (client_secret_basic when it allows it). */
  readonly clientAuthMethod?: 'client_secret_basic' | 'client_secret_post';
  /** SESSION_END_SESSION_METHOD: how /bff/logout sends the browser to the provider's end-session endpoint. */
  readonly endSessionMethod: 'get' | 'post';
  readonly idleTimeoutSeconds: number;
  readonly maxLifetimeSeconds: number;
  readonly revalidateSeconds: number;
}

export interface GatewayConfig {
  /** `local`: no UPSTREAM_BASE_URL nor UPSTREAM_ACCOUNTS_FILE outside production: the bundled simulator is the upstream. */
  readonly mode: GatewayMode;
  readonly production: boolean;
  readonly server: {
    readonly host: string;
    readonly port: number;
    readonly metricsPort?: number;
    /** /metrics on PORT: no METRICS_PORT (production requires METRICS_ON_MAIN_PORT=true for that). */
    readonly metricsOnMainPort: boolean;
    readonly bodyLimitBytes: number;
    readonly headersTimeoutMs: number;
    readonly requestTimeoutMs: number;
    readonly keepAliveTimeoutMs: number;
    /** Connections waiting to be accepted (SERVER_LISTEN_BACKLOG; the kernel caps it at net.core.somaxconn). */
    readonly listenBacklog: number;
    /**
     * Listening sockets on the port, SO_REUSEPORT (SERVER_ACCEPT_SOCKETS; Linux, one elsewhere): Node
     * accepts one connection per event-loop turn on each.
     */
    readonly acceptSockets: number;
    readonly shutdownTimeoutMs: number;
    readonly trustProxy: TrustProxySetting;
    readonly inboundAllowCidrs: readonly string[];
    readonly corsOrigins: readonly string[];
  };
  readonly log: { readonly level: string; readonly file?: string };
  /** OpenTelemetry traces; absent when off (no OTLP endpoint, or OTEL_SDK_DISABLED). */
  readonly tracing?: TracingSettings;
  readonly upstream: {
    /** Absent in local mode until the simulator has started and its URL is known, and with an accounts file. */
    readonly baseUrl?: string;
    /** UPSTREAM_ACCOUNTS_FILE, absolute: several provider accounts (SPEC §10) instead of `baseUrl` + credentials. */
    readonly accountsFile?: string;
    /** UPSTREAM_ALLOW_HTTP: outside production, plain http upstreams are accepted (tests). */
    readonly allowHttp: boolean;
    readonly timeoutMs: number;
    /** PEM certificates of UPSTREAM_CA_FILE, trusted for the upstream on top of the default roots. */
    readonly extraCa?: readonly string[];
    readonly staticHeaders: Readonly<Record<string, string>>;
    readonly maxSockets: number;
    /** Longest wait for a free upstream socket before answering 503 UPSTREAM_SATURATED (0: never wait). */
    readonly queueTimeoutMs: number;
    /** The provider budget of each account (SPEC §11): the longest wait for room, the cap on a provider pause. */
    readonly budget: { readonly waitMs: number; readonly retryAfterMaxSeconds: number };
    readonly circuit: CircuitSettings;
    readonly planCacheTtlSeconds: number;
    /** IDEMPOTENCY_TTL_SECONDS: how long an Idempotency-Key's claim and kept answer last (SPEC §13). */
    readonly idempotencyTtlSeconds: number;
  };
  readonly credentials: CredentialSettings;
  readonly tokens: {
    readonly refreshSkewSeconds: number;
    readonly encryptionKey?: Buffer;
    readonly lockTtlMs: number;
    readonly lockWaitMs: number;
    /** Fleet-wide minimum spacing of login attempts after the upstream refused one (account-lock protection). */
    readonly loginMinIntervalMs: number;
    /** Each further refusal doubles the spacing, up to this. */
    readonly loginMaxIntervalMs: number;
  };
  readonly redis: RedisSettings;
  readonly callers: {
    readonly clientsFile: string;
    /** OPERATIONS_FILE (SPEC §12), absolute. */
    readonly operationsFile: string;
    readonly defaultRateLimit: { readonly limit: number; readonly windowSeconds: number };
    /** Failed authentications per client IP and window before that IP's unauthenticated requests get 429. */
    readonly authFailureLimit: { readonly limit: number; readonly windowSeconds: number };
    readonly oidc?: OidcSettings;
  };
  /** Absent when browser sessions are off (no SESSION_ISSUER outside local mode). */
  readonly sessions?: SessionSettings;
  readonly usage: UsageSettings;
}

/** The usage ledger and the quota warnings (src/usage). */
export interface UsageSettings {
  /**
   * USAGE_REDIS_*: the ledger and the quota counters in a Redis of their own (the REDIS_* settings with this
   * topology); absent: they share the token store's Redis.
   */
  readonly redis?: RedisSettings;
  /** Ledger days are kept this long after they end (USAGE_RETENTION_DAYS). */
  readonly retentionDays: number;
  /** QUOTA_WEBHOOK_URL and the key that signs each call; absent when no webhook is set. */
  readonly webhook?: { readonly url: string; readonly secret: string };
}
