// The API-key client registry (CLIENTS_FILE): validated at load, looked up by key hash in constant time, reloaded on change.
import { timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { watchFile } from '../config/watch-file';
import { sha256Hex } from '../keys/hash';
import type { Caller } from './caller';
import { DEVELOPMENT_KEY_HASH } from './development-key';
import { type ClientEntry, type ClientRegistryFile, clientRegistrySchema } from './registry-schema';

export interface ClientRegistry {
  /** The client owning this API key, or undefined. Constant time in the key's content. */
  findByApiKey(key: string): Caller | undefined;
  /** The registry client with this id (an SSO token's azp / client_id), for its limit and origins. */
  findById(clientId: string): Caller | undefined;
  /**
   * Whether some entry is an SSO client's (neither keys nor `session`, with OIDC_ISSUER set): the registry then
   * names the SSO clients, and a token of any other client is refused.
   */
  listsSsoClients(): boolean;
  /** The web app of browser sessions with this client id (an entry with `session`), or undefined. */
  findWebApp(clientId: string): WebApp | undefined;
  /** Every origin some client lists (normalized, lower case); a fresh set after each reload. */
  allOrigins(): ReadonlySet<string>;
  originsOf(clientId: string): readonly string[];
  readonly size: number;
  /** Ids of the clients whose entry lists no `accounts` (an error once several accounts are configured). */
  clientsWithoutAccounts(): readonly string[];
  /** Re-reads the file now (SIGHUP); false when the new content was refused and the previous registry stays. */
  reload(): boolean;
  /** Whether the registry in use is the file's current content, or a last good version kept since a failure. */
  health(): RegistryHealth;
  close(): void;
}

/** A registry client that is a web app: its own limits and origins, and which claim values grant which scopes. */
export interface WebApp {
  readonly caller: Caller;
  readonly claim: string;
  /** Each user's own limit inside the app's, when the entry sets one. */
  readonly userRateLimit?: { readonly limit: number; readonly windowSeconds: number };
  /** The scopes a user with these claim values gets: the grants of each value, never beyond the entry's scopes. */
  scopesFor(claimValues: readonly string[]): ReadonlySet<string>;
}

/** Why a reload was refused: the file could not be read, or its content is invalid. */
export type RegistryReloadFailure = 'unreadable' | 'invalid';

/**
 * `staleSince`: epoch ms of the first failed reload since the registry last matched the file (absent while it
 * does); until the file is fixed, keys removed from it (revoked) still work. `lastFailure`: the latest refusal.
 */
export type RegistryHealth =
  | { readonly staleSince?: undefined; readonly lastFailure?: undefined }
  | { readonly staleSince: number; readonly lastFailure: RegistryReloadFailure };

/** The two registry metrics (see observability/metrics.ts); optional so tools and tests can load without them. */
export interface RegistryMetrics {
  readonly registryReloadFailures: { inc(labels: { reason: RegistryReloadFailure }): void };
  readonly registryStaleSince: { set(value: number): void };
}

type LogFn = (fields: Record<string, unknown>, message: string) => void;
export interface RegistryLogger {
  info: LogFn;
  error: LogFn;
}

export interface LoadClientRegistryOptions {
  readonly logger: RegistryLogger;
  /** Watch the file and reload on change (fs.watch on its directory plus a periodic stat). */
  readonly watch: boolean;
  /** Period of the stat fallback, for file systems where fs.watch misses events. Default 5000 ms. */
  readonly pollIntervalMs?: number;
  readonly metrics?: RegistryMetrics;
  /** Epoch ms; for tests. */
  readonly now?: () => number;
  /** Production: a registry holding the public development key is refused, at start and on every reload. */
  readonly refuseDevelopmentKey?: boolean;
  /** The provider accounts configured now (SPEC §10): with several, every entry must list its `accounts`. */
  readonly configuredAccounts?: () => ReadonlySet<string>;
  /** SSO bearer tokens are verified: entries without keys or session are SSO clients (ParseRegistryOptions). */
  readonly ssoClients?: boolean;
}

export interface ParseRegistryOptions {
  readonly refuseDevelopmentKey?: boolean;
  readonly configuredAccounts?: () => ReadonlySet<string>;
  /**
   * SSO bearer tokens are verified (OIDC_ISSUER): an entry with neither keys nor `session` is an SSO client's. Without
   * SSO such an entry could never be used, and is refused as the mistake it is.
   */
  readonly ssoClients?: boolean;
}

/** Invalid registry content; the message names the file, the client and the field, never a key or hash. */
export class ClientRegistryError extends Error {
  constructor(
    readonly file: string,
    readonly problems: readonly string[],
  ) {
    super(`invalid client registry ${file}: ${problems.join('; ')}`);
    this.name = 'ClientRegistryError';
  }
}

/** Presented keys longer than this are refused before hashing (generated keys are 47 characters). */
const MAX_KEY_LENGTH = 512;

interface KeyRecord {
  /** The key's SHA-256 as lower-case hex, in bytes (for the constant-time comparison). */
  readonly hexHash: Buffer;
  readonly caller: Caller;
}

/** One validated version of the registry, swapped whole on reload. */
export interface RegistrySnapshot {
  readonly byHash: ReadonlyMap<string, KeyRecord>;
  readonly byId: ReadonlyMap<string, Caller>;
  readonly webApps: ReadonlyMap<string, WebApp>;
  readonly origins: ReadonlySet<string>;
  /** Entries that are an SSO client's only (no keys, no session, OIDC_ISSUER set). */
  readonly ssoClients: number;
}

export function normalizeOrigin(origin: string): string {
  return origin.trim().toLowerCase().replace(/\/+$/, '');
}

/** Parses and validates registry text; throws ClientRegistryError listing every problem. */
export function parseClientRegistry(
  text: string,
  file: string,
  options: ParseRegistryOptions = {},
): RegistrySnapshot {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ClientRegistryError(file, ['is not valid JSON']);
  }
  const parsed = clientRegistrySchema.safeParse(raw);
  if (!parsed.success)
    throw new ClientRegistryError(
      file,
      parsed.error.issues.map((issue) => describe(issue, raw)),
    );
  return buildSnapshot(parsed.data, file, options);
}

/** "client "checkout-web" (clients[0]) keys[1]: must be ..." — zod messages never include the offending value. */
function describe(issue: z.core.$ZodIssue, raw: unknown): string {
  const [top, index, ...rest] = issue.path;
  if (top !== 'clients' || typeof index !== 'number') {
    return `${issue.path.length > 0 ? issue.path.join('.') : 'the file'}: ${issue.message}`;
  }
  const entry = (raw as { clients: unknown[] }).clients[index] as { id?: unknown } | undefined;
  const id = typeof entry?.id === 'string' && entry.id.length <= 64 ? `client "${entry.id}" ` : '';
  const field = rest.map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`)).join('');
  return `${id}(clients[${index}])${field ? ` ${field.replace(/^\./, '')}` : ''}: ${issue.message}`;
}

function buildSnapshot(
  registry: ClientRegistryFile,
  file: string,
  options: ParseRegistryOptions,
): RegistrySnapshot {
  const problems: string[] = [];
  const byHash = new Map<string, KeyRecord>();
  const byId = new Map<string, Caller>();
  const origins = new Set<string>();
  const webApps = new Map<string, WebApp>();
  const accounts = options.configuredAccounts?.();
  let ssoClients = 0;
  for (const entry of registry.clients) {
    if (byId.has(entry.id)) {
      problems.push(`client "${entry.id}" appears more than once`);
      continue;
    }
    if (entry.keys.length === 0 && !entry.session && options.ssoClients) ssoClients += 1;
    else if (entry.keys.length === 0 && !entry.session)
      problems.push(
        `client "${entry.id}" (clients[${registry.clients.indexOf(entry)}]) keys: must list at least one key hash ` +
          '(or be a session web app, or an SSO client while OIDC_ISSUER is set)',
      );
    if (!entry.accounts && accounts && accounts.size > 1)
      problems.push(
        `client "${entry.id}" lists no "accounts" while several provider accounts are configured ` +
          `(${[...accounts].join(', ')}): name the ones it may use, its default first`,
      );
    const clientOrigins = [...new Set((entry.origins ?? []).map(normalizeOrigin))];
    const caller: Caller = Object.freeze({
      id: entry.id,
      scopes: new Set(entry.scopes),
      via: 'api-key' as const,
      rateLimit: entry.rateLimit ? Object.freeze({ ...entry.rateLimit }) : undefined,
      priority: entry.priority,
      quota: entry.quota
        ? Object.freeze({
            day: entry.quota.day,
            month: entry.quota.month,
            timeZone: entry.quota.timezone ?? 'UTC',
          })
        : undefined,
      accounts: entry.accounts ? Object.freeze([...entry.accounts]) : undefined,
      origins: Object.freeze(clientOrigins),
    });
    byId.set(entry.id, caller);
    if (entry.session) webApps.set(entry.id, webApp(caller, entry.session));
    for (const origin of clientOrigins) origins.add(origin);
    entry.keys.forEach((key, index) => {
      const hex = key.slice('sha256:'.length).toLowerCase();
      if (options.refuseDevelopmentKey && hex === DEVELOPMENT_KEY_HASH) {
        problems.push(
          `client "${entry.id}" keys[${index}] is the public development key of config/clients.local.json, ` +
            'refused in production: remove it and issue a real key with `npm run client-key`',
        );
        return;
      }
      const owner = byHash.get(hex);
      if (owner) {
        problems.push(
          owner.caller.id === entry.id
            ? `client "${entry.id}" keys[${index}] repeats one of its own key hashes`
            : `client "${entry.id}" keys[${index}] is also a key hash of client "${owner.caller.id}"`,
        );
        return;
      }
      byHash.set(hex, { hexHash: Buffer.from(hex, 'latin1'), caller });
    });
  }
  if (problems.length > 0) throw new ClientRegistryError(file, problems);
  return { byHash, byId, webApps, origins, ssoClients };
}

function webApp(caller: Caller, session: NonNullable<ClientEntry['session']>): WebApp {
  const grants = new Map(Object.entries(session.grants));
  return Object.freeze({
    caller,
    claim: session.claim,
    userRateLimit: session.userRateLimit ? Object.freeze({ ...session.userRateLimit }) : undefined,
    scopesFor(claimValues: readonly string[]) {
      const scopes = new Set<string>();
      for (const value of claimValues)
        for (const scope of grants.get(value) ?? []) if (caller.scopes.has(scope)) scopes.add(scope);
      return scopes;
    },
  });
}

/**
 * Loads CLIENTS_FILE; throws ClientRegistryError (or the read error) when it is missing or invalid at start.
 * While watching, a broken new version is logged and refused: the previous registry keeps serving.
 */
export function loadClientRegistry(file: string, options: LoadClientRegistryOptions): ClientRegistry {
  const { logger, metrics } = options;
  const now = options.now ?? Date.now;
  let lastText = readFileSync(file, 'utf8');
  const parseOptions: ParseRegistryOptions = options;
  let snapshot = parseClientRegistry(lastText, file, parseOptions);
  let refusedText: string | undefined;
  let health: RegistryHealth = {};
  metrics?.registryStaleSince.set(0);

  /** Loud on purpose: until the file is fixed, a key the operator just revoked keeps working. */
  function refuse(reason: RegistryReloadFailure, fields: Record<string, unknown>, message: string): false {
    const staleSince = health.staleSince ?? now();
    health = { staleSince, lastFailure: reason };
    metrics?.registryReloadFailures.inc({ reason });
    metrics?.registryStaleSince.set(staleSince / 1000);
    logger.error(
      { file, reason, staleSince: new Date(staleSince).toISOString(), ...fields },
      `${message}; keeping the previous registry, so keys removed from the file still work until it is fixed`,
    );
    return false;
  }

  function current(): true {
    if (health.staleSince !== undefined) {
      logger.info(
        { file, staleSince: new Date(health.staleSince).toISOString() },
        'client registry matches the file again',
      );
    }
    health = {};
    refusedText = undefined;
    metrics?.registryStaleSince.set(0);
    return true;
  }

  function reloadIfChanged(): boolean {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      // Mid-swap (ConfigMap symlink flip) or deleted: keep serving, the next event or poll retries.
      const code = (error as NodeJS.ErrnoException).code;
      return refuse('unreadable', { code }, 'client registry unreadable');
    }
    if (text === lastText) return current();
    if (text === refusedText) return false;
    try {
      snapshot = parseClientRegistry(text, file, parseOptions);
    } catch (error) {
      refusedText = text;
      const problems = error instanceof ClientRegistryError ? error.problems : [(error as Error).message];
      return refuse('invalid', { problems }, 'client registry reload refused');
    }
    lastText = text;
    logger.info({ file, clients: snapshot.byId.size }, 'client registry reloaded');
    return current();
  }

  const stopWatching = options.watch
    ? watchFile(file, options.pollIntervalMs ?? 5_000, reloadIfChanged)
    : undefined;

  return {
    findByApiKey: (key) => findByKey(snapshot, key),
    findById: (clientId) => snapshot.byId.get(clientId),
    listsSsoClients: () => snapshot.ssoClients > 0,
    findWebApp: (clientId) => snapshot.webApps.get(clientId),
    allOrigins: () => snapshot.origins,
    originsOf: (clientId) => snapshot.byId.get(clientId)?.origins ?? [],
    get size() {
      return snapshot.byId.size;
    },
    clientsWithoutAccounts: () => withoutAccounts(snapshot),
    reload: reloadIfChanged,
    health: () => health,
    close: () => stopWatching?.(),
  };
}

function withoutAccounts(snapshot: RegistrySnapshot): string[] {
  return [...snapshot.byId.values()].filter((caller) => !caller.accounts).map((caller) => caller.id);
}

function findByKey(snapshot: RegistrySnapshot, key: unknown): Caller | undefined {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) return undefined;
  const digest = sha256Hex(key);
  // A Map keyed by the presented key's hash: the lookup's timing depends only on SHA-256(key), which an
  // attacker cannot steer toward a stored hash (they would need a preimage), so it leaks nothing about the
  // stored keys. The final comparison is still constant time, so a match is never decided by a short-circuit
  // string compare. A linear timingSafeEqual scan would also be safe but costs O(keys) per request.
  const record = snapshot.byHash.get(digest);
  if (!record || !timingSafeEqual(record.hexHash, Buffer.from(digest, 'latin1'))) return undefined;
  return record.caller;
}
