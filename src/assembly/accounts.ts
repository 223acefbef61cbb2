// Builds the provider accounts (SPEC §10): the set of account units over the shared store, seal and observability.

import { buildAccount } from '../accounts/account';
import { type AccountSet, createAccountSet } from '../accounts/account-set';
import type { CatalogueSource } from '../catalogue';
import type { AccountSpecSource } from '../config/account-spec';
import type { GatewayConfig } from '../config/gateway-config';
import type { QuotaGate } from '../usage';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';
import type { Redis } from './redis';
import type { SharedTokens } from './tokens';

/** How often a refused set of accounts is read again (the accounts file's own poll period). */
const ACCOUNTS_RETRY_MS = 5_000;

export function buildAccounts(
  config: GatewayConfig,
  source: AccountSpecSource,
  redis: Redis,
  shared: SharedTokens,
  { logger, metrics, tracing }: Observability,
  quotas: Pick<QuotaGate, 'reserve'> | undefined,
  /** The catalogue in force: each account makes its operations' circuits up front. */
  catalogue: Pick<CatalogueSource, 'operationIds'>,
): Promise<Built<AccountSet>> {
  return building(async (closers) => {
    const common = {
      config,
      store: shared.store,
      storeHealth: redis.health,
      redis: redis.client,
      seal: shared.seal,
      fingerprintKey: shared.fingerprintKey,
      logger,
      metrics,
      tracing,
      quotas,
      operations: () => catalogue.operationIds(),
    };
    const accounts = await createAccountSet({
      source,
      build: (spec) => buildAccount(spec, common),
      logger,
      metrics,
      // A retired account's calls get their whole time: the wait for a socket, then the call itself.
      drainMs: config.upstream.queueTimeoutMs + config.upstream.timeoutMs * 2,
      // At shutdown, a call still out ends with its answer or its own timeout (one attempt: the wait for a socket,
      // then the call), so the ledger counts it as the provider does; README "Graceful shutdown" sizes the grace.
      settleMs: (account) => config.upstream.queueTimeoutMs + account.spec.timeoutMs,
      // A refused set is tried again as often as the file is polled: a missing credential file that lands is found.
      retryMs: ACCOUNTS_RETRY_MS,
    });
    closers.push(() => accounts.close());
    logger.info({ accounts: [...accounts.ids()] }, 'provider accounts ready');
    return accounts;
  });
}
