// The doctor's real probes: a Redis PING on the configured topology and one POST /api/token/ to the upstream.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { ClientRegistryError, loadClientRegistry } from '../callers/client-registry';
import type { GatewayConfig } from '../config/gateway-config';
import { createRedisClient, describeRedisTopology, type RedisClient } from '../store/redis-connection';
import { readDurability } from '../store/redis-durability';
import { upstreamCa } from '../tls/upstream-trust';
import { ACCESS_FALLBACK_SECONDS, LOGIN_PATH, tokenExpiresAt } from '../tokens';
import type { ClientsCheck, LedgerStoreCheck, StoreCheck, TokenAttempt } from './doctor';

const STORE_TIMEOUT_MS = 3_000;

const silentRegistryLogger = { info: () => undefined, error: () => undefined };

/** Loads CLIENTS_FILE as the gateway does (same schema, duplicate checks, production refusals), once, unwatched. */
export function checkClientRegistry(config: GatewayConfig): ClientsCheck {
  const file = config.callers.clientsFile;
  try {
    const registry = loadClientRegistry(file, {
      logger: silentRegistryLogger,
      watch: false,
      refuseDevelopmentKey: config.production,
      ssoClients: config.callers.oidc !== undefined,
    });
    const clients = registry.size;
    registry.close();
    return { kind: 'loaded', file, clients };
  } catch (error) {
    if (error instanceof ClientRegistryError) return { kind: 'invalid', file, problems: error.problems };
    return { kind: 'unreadable', file, code: (error as NodeJS.ErrnoException).code ?? 'error' };
  }
}

/** Connects with the gateway's own settings, waits for `ready`, PINGs, disconnects. Never prints the password. */
export async function checkRedisStore(config: GatewayConfig): Promise<StoreCheck> {
  if (config.redis.topology.kind === 'none')
    return {
      kind: 'memory',
      reason:
        config.mode === 'local'
          ? 'local mode: tokens and rate limits live in this process'
          : config.redis.allowMemoryStore
            ? 'ALLOW_MEMORY_STORE=true: each replica keeps its own token'
            : 'no Redis configured: each replica keeps its own token (set REDIS_URL to run several replicas)',
    };
  const where = describeRedisTopology(config.redis.topology);
  const client = createRedisClient(config.redis, { retry: false });
  if (!client) return { kind: 'memory', reason: 'no Redis configured' };
  let lastError: string | undefined;
  client.on('error', (error: Error & { code?: string }) => {
    lastError = error.code ?? error.message;
  });
  try {
    const started = performance.now();
    await untilReady(client, () => lastError);
    await client.ping();
    return { kind: 'redis', where, ok: true, latencyMs: Math.round(performance.now() - started) };
  } catch (error) {
    return {
      kind: 'redis',
      where,
      ok: false,
      problem: scrub((error as Error).message, [
        config.redis.password,
        config.redis.sentinelPassword,
        config.redis.tlsFiles?.key,
      ]),
    };
  } finally {
    client.disconnect();
  }
}

/**
 * The Redis that holds the usage ledger and the quota counters (USAGE_REDIS_*, else the token store's): does it keep
 * them across a restart? One CONFIG GET (src/store/redis-durability.ts).
 */
export async function checkLedgerStore(config: GatewayConfig): Promise<LedgerStoreCheck> {
  const settings = config.usage.redis ?? config.redis;
  const separate = config.usage.redis !== undefined;
  const client = createRedisClient(settings, { retry: false });
  if (!client) return { kind: 'memory' };
  const where = describeRedisTopology(settings.topology);
  let lastError: string | undefined;
  client.on('error', (error: Error & { code?: string }) => {
    lastError = error.code ?? error.message;
  });
  try {
    await untilReady(client, () => lastError);
    const durability = await readDurability(client);
    return {
      kind: 'redis',
      where,
      separate,
      durability,
      ...((await isReplica(client)) && { replica: true }),
    };
  } catch (error) {
    const problem = scrub((error as Error).message, [settings.password, settings.sentinelPassword]);
    return { kind: 'redis', where, separate, problem };
  } finally {
    client.disconnect();
  }
}

/**
 * Whether the Redis answering is a replica (read-only: every ledger write and quota claim would be refused). ROLE is
 * an admin command: refused, nothing is claimed. Sentinel and Cluster clients reach masters on their own.
 */
async function isReplica(client: RedisClient): Promise<boolean> {
  try {
    const role = (await client.call('ROLE')) as unknown[];
    return Array.isArray(role) && role[0] === 'slave';
  } catch {
    return false;
  }
}

/** Resolves once `client` is ready; rejects with the last connection error after STORE_TIMEOUT_MS or on close. */
export function untilReady(client: RedisClient, lastError: () => string | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (client.status === 'ready') return resolve();
    const timer = setTimeout(
      () => reject(new Error(lastError() ?? `no answer within ${STORE_TIMEOUT_MS} ms`)),
      STORE_TIMEOUT_MS,
    );
    client.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
    client.once('end', () => {
      clearTimeout(timer);
      reject(new Error(lastError() ?? 'connection closed'));
    });
  });
}

function scrub(text: string, secrets: readonly (string | undefined)[]): string {
  const oneLine = text.split('\n')[0] ?? '';
  return secrets.reduce<string>((line, secret) => (secret ? line.split(secret).join('***') : line), oneLine);
}

export interface TokenTarget {
  readonly baseUrl: string;
  /** Shown in the report instead of the URL (e.g. "the bundled simulator"). */
  readonly label?: string;
  readonly username: string;
  readonly password: string;
}

/**
 * One login with node:http(s) rather than fetch: the socket's local address (the egress IP before any NAT) and
 * the raw error code (ECONNREFUSED, CERT_HAS_EXPIRED, ENOTFOUND...) are what the verdict needs.
 */
export function requestUpstreamToken(
  target: TokenTarget,
  options: {
    timeoutMs: number;
    headers?: Readonly<Record<string, string>>;
    /** UPSTREAM_CA_FILE's certificates: the doctor trusts what the gateway trusts. */
    extraCa?: readonly string[];
    /** The account's localAddress: the doctor leaves from the address the account's sockets use. */
    localAddress?: string;
  },
): Promise<TokenAttempt> {
  // The very URL the token client logs in at (a path in UPSTREAM_BASE_URL kept): the doctor never passes on another.
  const url = new URL(`${target.baseUrl}${LOGIN_PATH}`);
  const base = new URL(target.baseUrl);
  // Origin and path, never a user or password in the URL.
  const shown = target.label ?? `${base.origin}${base.pathname.replace(/\/+$/, '')}`;
  const body = JSON.stringify({ username: target.username, password: target.password });
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let localAddress: string | undefined;
    let timedOut = false;
    const req = send(
      url,
      {
        method: 'POST',
        headers: {
          ...options.headers,
          'content-type': 'application/json',
          accept: 'application/json',
          'content-length': Buffer.byteLength(body),
        },
        agent: false,
        ...(options.localAddress !== undefined && { localAddress: options.localAddress }),
        ...(url.protocol === 'https:' && options.extraCa ? { ca: upstreamCa(options.extraCa) } : {}),
      },
      (res: IncomingMessage) => {
        localAddress = res.socket?.localAddress ?? localAddress;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (text.length < 64 * 1024) text += chunk;
        });
        res.on('end', () => {
          resolve({
            kind: 'answer',
            target: shown,
            status: res.statusCode ?? 0,
            localAddress,
            ...tokenFacts(text),
          });
        });
        res.on('error', () =>
          resolve({
            kind: 'error',
            target: shown,
            code: 'ECONNRESET',
            timedOut,
            timeoutMs: options.timeoutMs,
          }),
        );
      },
    );
    req.on('socket', (socket) => {
      socket.once('connect', () => {
        localAddress = socket.localAddress;
      });
    });
    // A deadline for the whole exchange, not an idle timeout: an upstream trickling bytes (or a TLS handshake that
    // stalls) would otherwise hold the doctor past UPSTREAM_TIMEOUT_MS, or without end.
    const deadline = setTimeout(() => {
      timedOut = true;
      req.destroy();
    }, options.timeoutMs);
    req.once('close', () => clearTimeout(deadline));
    req.on('error', (error: NodeJS.ErrnoException) => {
      resolve({ kind: 'error', target: shown, code: error.code, timedOut, timeoutMs: options.timeoutMs });
    });
    req.end(body);
  });
}

/** Whether a token pair came back, and the access lifetime; the tokens themselves are dropped here. */
function tokenFacts(text: string): { tokenIssued: boolean; accessLifetimeSeconds?: number } {
  try {
    const { access, refresh } = JSON.parse(text) as { access?: unknown; refresh?: unknown };
    if (typeof access !== 'string' || typeof refresh !== 'string' || access === '')
      return { tokenIssued: false };
    const now = Date.now();
    return {
      tokenIssued: true,
      accessLifetimeSeconds: Math.round((tokenExpiresAt(access, ACCESS_FALLBACK_SECONDS, now) - now) / 1000),
    };
  } catch {
    return { tokenIssued: false };
  }
}
