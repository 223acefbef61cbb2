// What the benchmark and the soak share: paths, the seed plan, a valid document, and their settings' parser.
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { writeClientsFile } from '../../test/support/clients-file';

export const ROOT = resolve(__dirname, '..', '..', '..');
/** The pinned Node 24 running this script runs every child too. */
export const NODE = process.execPath;
export const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
export const DOCUMENT_BODY = JSON.stringify({
  country: 'ARG',
  document: { id: '20-17254359-7', type: 'CUIT' },
});

/** A positive number from the environment, or `fallback` when unset. */
export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
}

/** A registry with one client allowed everything, with a limit that load never reaches; its key is fresh. */
export function writeLoadClient(id: string): { apiKey: string; clientsFile: string } {
  const apiKey = randomBytes(24).toString('base64url');
  const clientsFile = writeClientsFile([
    {
      id,
      keys: [apiKey],
      scopes: ['documents:validate', 'plans:read'],
      rateLimit: { limit: 1_000_000, windowSeconds: 60 },
    },
  ]);
  return { apiKey, clientsFile };
}

export interface FeaturedGatewaySettings {
  readonly upstream: string;
  /** Governed set-up (governed-setup.ts): the accounts file replaces the single-account variables. */
  readonly accountsFile?: string;
  readonly username: string;
  readonly password: string;
  readonly redisUrl: string;
  readonly clientsFile: string;
  readonly logFile: string;
}

/**
 * A gateway with every feature on, as the benchmark and the soak run it: API keys, the Redis-shared rate limit, the
 * token pair cached in Redis and encrypted, the request log at info to a file, metrics. `extra` adds or overrides.
 */
export function featuredGatewayEnv(
  settings: FeaturedGatewaySettings,
  extra: Record<string, string> = {},
): Record<string, string> {
  const upstream: Record<string, string> = settings.accountsFile
    ? { UPSTREAM_ACCOUNTS_FILE: settings.accountsFile }
    : {
        UPSTREAM_BASE_URL: settings.upstream,
        UPSTREAM_USERNAME: settings.username,
        UPSTREAM_PASSWORD: settings.password,
      };
  return {
    ...upstream,
    // A plain-http upstream on loopback: the production rules (NODE_ENV unset with an upstream) would refuse it.
    NODE_ENV: 'test',
    UPSTREAM_ALLOW_HTTP: 'true',
    REDIS_URL: settings.redisUrl,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    CLIENTS_FILE: settings.clientsFile,
    LOG_LEVEL: 'info',
    LOG_FILE: settings.logFile,
    ...extra,
  };
}
