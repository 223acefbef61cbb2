// `npm run doctor [-- --force-login]`: prints each check with ✓/!/✗ and its fix; exits 0 only when no check fails.

import { type AccountSpec, defaultAccountSpec } from '../config/account-spec';
import { accountsFileOptionsOf, readAccountsFile } from '../config/accounts-file';
import type { GatewayConfig } from '../config/gateway-config';
import { loadConfig } from '../config/load-config';
import { type AccountList, formatReport, runDoctor } from './doctor';
import { probeAccount } from './doctor-account-probe';
import { FORCE_LOGIN_FLAG } from './doctor-backoff';
import { catalogueStep } from './doctor-catalogue';
import { checkClientRegistry, checkLedgerStore, checkRedisStore } from './doctor-checks';
import { sessionProviderStep } from './doctor-session-provider';

const USAGE = `Usage: npm run doctor [-- ${FORCE_LOGIN_FLAG}]

  ${FORCE_LOGIN_FLAG}  log in once per account even while the fleet backs off after a refusal
                 (each login counts toward the provider's lock-out of the merchant account)
`;

/**
 * The accounts the doctor checks in upstream mode: the accounts file's set, read once (its ConfigError on an invalid
 * file becomes the doctor's failed "provider accounts" step and a non-zero exit), or without the file the
 * single-account variables' account `default`.
 */
export async function configuredAccounts(config: GatewayConfig): Promise<readonly AccountSpec[]> {
  if (config.upstream.accountsFile)
    return readAccountsFile(accountsFileOptionsOf(config, config.upstream.accountsFile));
  return config.upstream.baseUrl ? [defaultAccountSpec(config, config.upstream.baseUrl)] : [];
}

/** The accounts, or in local mode the bundled simulator's (started here, as the gateway would; loaded only then). */
async function listAccounts(config: GatewayConfig): Promise<AccountList> {
  if (config.mode === 'upstream')
    return {
      accounts: await configuredAccounts(config),
      close: async () => undefined,
    };
  const simulator = await (await import('../local-mode.js')).startLocalUpstream();
  const { username, password } = simulator.credentials.current();
  const local = { ...config, credentials: { username, password } };
  return { accounts: [defaultAccountSpec(local, simulator.baseUrl)], close: () => simulator.close() };
}

async function main(args: readonly string[]): Promise<number> {
  const unknown = args.filter((arg) => arg !== FORCE_LOGIN_FLAG);
  if (unknown.length > 0) {
    process.stderr.write(unknown.includes('--help') ? USAGE : `unknown argument ${unknown[0]}\n${USAGE}`);
    return unknown.includes('--help') ? 0 : 2;
  }
  const report = await runDoctor({
    loadConfig: () => loadConfig(process.env),
    checkClients: checkClientRegistry,
    checkCatalogue: catalogueStep,
    checkStore: checkRedisStore,
    checkLedgerStore,
    checkSessionProvider: sessionProviderStep,
    listAccounts,
    probeAccount: (config, account) =>
      probeAccount(
        config,
        account,
        config.mode === 'local' ? `the bundled simulator (${account.baseUrl})` : undefined,
      ),
    forceLogin: args.includes(FORCE_LOGIN_FLAG),
  });
  process.stdout.write(formatReport(report));
  return report.ok ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`doctor failed unexpectedly (${(error as Error)?.name ?? 'error'})\n`);
    process.exitCode = 2;
  },
);
