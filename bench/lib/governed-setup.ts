// The benchmark's governed set-up (provider accounts, budget, quota, usage ledger): its two merchant accounts, the
// simulator settings that make the bundled simulator know both, and a check that the gateway answers through each.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SIMULATOR_DEFAULT_PASSWORD, SIMULATOR_DEFAULT_USERNAME } from '../../src/simulator/simulator-config';
import { keyHash } from '../../test/support/clients-file';
import { tempDir } from '../../test/support/temp-dir';
import { PLAN_ID } from './fixtures';

export type GovernedAccountId = 'primary' | 'secondary';

/**
 * Two merchants at one provider, as local mode shows them: `primary` logs in with the simulator's own pair (what a
 * newcomer's `npm run simulator` accepts), `secondary` with a pair of its own that every simulator of the benchmark
 * is told (`SIMULATOR_EXTRA_ACCOUNTS`, see {@link benchSimulatorEnv}). The fast upstreams accept any credentials.
 */
export const GOVERNED_ACCOUNTS: Readonly<
  Record<GovernedAccountId, { readonly username: string; readonly password: string }>
> = Object.freeze({
  primary: { username: SIMULATOR_DEFAULT_USERNAME, password: SIMULATOR_DEFAULT_PASSWORD },
  secondary: { username: 'bench-secondary-merchant', password: 'bench-secondary-password' },
});

/** SIMULATOR_* variables for a benchmark's simulator: the governed set-up's second merchant, and `env`. */
export function benchSimulatorEnv(env: Record<string, string> = {}): Record<string, string> {
  return { SIMULATOR_EXTRA_ACCOUNTS: JSON.stringify([GOVERNED_ACCOUNTS.secondary]), ...env };
}

/**
 * The governed set-up with the load client of `writeLoadClient`: the two accounts at the same upstream with their own
 * credentials, the first with a budget far above any load, and the client on both with a day quota that load never
 * reaches. What a gateway in front of several merchant accounts pays per request for governing them.
 */
export function writeGovernedSetup(
  id: string,
  apiKey: string,
  upstream: string,
): { readonly clientsFile: string; readonly accountsFile: string } {
  const dir = tempDir('bench-governed-');
  const secret = (name: string, value: string) => {
    const file = join(dir, name);
    writeFileSync(file, value);
    return file;
  };
  const account = (accountId: GovernedAccountId, extra: Record<string, unknown> = {}) => ({
    id: accountId,
    baseUrl: upstream,
    usernameFile: secret(`${accountId}-username`, GOVERNED_ACCOUNTS[accountId].username),
    passwordFile: secret(`${accountId}-password`, GOVERNED_ACCOUNTS[accountId].password),
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

/**
 * One plan read through each governed account (`X-Upstream-Account`), before anything is measured: an account the
 * upstream refuses fails the benchmark here, naming it, instead of as errors in every row of the report.
 */
export async function checkGovernedAccounts(
  gatewayUrl: string,
  headers: Record<string, string>,
): Promise<void> {
  const problems: string[] = [];
  for (const id of Object.keys(GOVERNED_ACCOUNTS) as GovernedAccountId[]) {
    const response = await fetch(`${gatewayUrl}/api/subscriptions/plan/${PLAN_ID}`, {
      headers: { ...headers, 'x-upstream-account': id },
    });
    const body = await response.text();
    const servedBy = response.headers.get('x-upstream-account');
    if (response.status !== 200 || servedBy !== id)
      problems.push(
        `account ${id}: ${response.status} (served by ${servedBy ?? 'none'}) ${body.slice(0, 200)}`,
      );
  }
  if (problems.length > 0)
    throw new Error(
      `bench: the governed gateway at ${gatewayUrl} cannot read through its accounts: ${problems.join('; ')}`,
    );
}
