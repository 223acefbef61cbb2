// Decides which provider accounts the gateway serves: the accounts file, the single-account variables (one account
// named `default`), or in local mode the accounts of the bundled simulator handed in.
import {
  type AccountSpec,
  type AccountSpecSource,
  DEFAULT_ACCOUNT_ID,
  defaultAccountSpec,
  fixedAccountSpecSource,
} from '../config/account-spec';
import { accountsFileOptionsOf, createAccountsFileSource } from '../config/accounts-file';
import type { GatewayConfig } from '../config/gateway-config';
import type { CredentialSource } from '../tokens';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';

/** The bundled simulator standing in for the provider; src/local-mode.ts starts it (never production start-up). */
export interface LocalUpstream {
  readonly baseUrl: string;
  /** The development credentials of the simulator's first account (the doctor's local check uses them). */
  readonly credentials: CredentialSource;
  /** The accounts local mode serves at the simulator, each with its own credentials; `default` when absent. */
  readonly accounts?: readonly {
    readonly id: string;
    readonly username: string;
    readonly password: string;
  }[];
  close(): Promise<void>;
}

export interface Upstream {
  /** Where the accounts come from. */
  readonly source: AccountSpecSource;
  /** The simulator URL in local mode. */
  readonly simulatorUrl?: string;
}

export function resolveUpstream(
  config: GatewayConfig,
  local: LocalUpstream | undefined,
  { logger }: Observability,
): Promise<Built<Upstream>> {
  return building((closers) => {
    if (local) closers.push(() => local.close());
    if (config.mode === 'upstream' && config.upstream.accountsFile)
      return {
        source: createAccountsFileSource(accountsFileOptionsOf(config, config.upstream.accountsFile)),
      };
    if (config.mode === 'upstream' && config.upstream.baseUrl)
      return { source: fixedAccountSpecSource([defaultAccountSpec(config, config.upstream.baseUrl)]) };
    if (!local) throw new Error('local mode needs the bundled simulator: start it with startLocalUpstream()');
    logger.warn(
      { simulator: local.baseUrl },
      'local mode: the upstream is the bundled Payment API simulator',
    );
    const { username, password } = local.credentials.current();
    const accounts: AccountSpec[] = (local.accounts ?? [{ id: DEFAULT_ACCOUNT_ID, username, password }]).map(
      (account) => ({
        ...defaultAccountSpec(config, local.baseUrl),
        id: account.id,
        credentials: { username: account.username, password: account.password },
      }),
    );
    return { source: fixedAccountSpecSource(accounts), simulatorUrl: local.baseUrl };
  });
}
