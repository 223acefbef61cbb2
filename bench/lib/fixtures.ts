// What the benchmark and the soak share: paths, the seed plan, a valid document, and their settings' parser.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { keyHash, writeClientsFile } from '../../test/support/clients-file';
import { tempDir } from '../../test/support/temp-dir';

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

/**
 * The governed set-up (provider accounts, budget, quota, usage ledger), with the load client of `writeLoadClient`:
 * two accounts at the same upstream with their own credentials, the first with a budget far above any load, and the
 * client on both with a day quota that load never reaches. What a gateway in front of several merchant accounts pays
 * per request for governing them.
 */
export function writeGovernedSetup(
  id: string,
  apiKey: string,
  upstream: string,
  credentials: { readonly username: string; readonly password: string },
): { readonly clientsFile: string; readonly accountsFile: string } {
  const dir = tempDir('bench-governed-');
  const secret = (name: string, value: string) => {
    const file = join(dir, name);
    writeFileSync(file, value);
    return file;
  };
  const account = (accountId: string, extra: Record<string, unknown> = {}) => ({
    id: accountId,
    baseUrl: upstream,
    usernameFile: secret(`${accountId}-username`, `${credentials.username}-${accountId}`),
    passwordFile: secret(`${accountId}-password`, credentials.password),
    ...extra,
  });
  // BENCH_GOVERNANCE=accounts: the two accounts alone (no budget, no quota), to tell their cost from the others'.
  const accountsOnly = process.env.BENCH_GOVERNANCE === 'accounts';
  const accountsFile = join(dir, 'accounts.json');
  writeFileSync(
    accountsFile,
    JSON.stringify({
      accounts: [
        account('primary', accountsOnly ? {} : { budget: { requestsPerSecond: 1_000_000, burst: 100_000 } }),
        account('secondary'),
      ],
    }),
  );
  const clientsFile = join(dir, 'clients.json');
  writeFileSync(
    clientsFile,
    JSON.stringify({
      clients: [
        {
          id,
          keys: [keyHash(apiKey)],
          scopes: ['documents:validate', 'plans:read'],
          rateLimit: { limit: 1_000_000, windowSeconds: 60 },
          accounts: ['primary', 'secondary'],
          ...(!accountsOnly && {
            priority: 'standard',
            quota: { day: 1_000_000_000, timezone: 'America/Sao_Paulo' },
          }),
        },
      ],
    }),
  );
  return { clientsFile, accountsFile };
}

export interface FeaturedGatewaySettings {
  readonly upstream: string;
  /** Governed set-up (writeGovernedSetup): the accounts file replaces the single-account variables. */
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
