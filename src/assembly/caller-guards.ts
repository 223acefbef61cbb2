// Builds what stands between a caller and an operation: the client registry, authentication (API keys, SSO tokens,
// browser sessions), limits, CORS, CIDRs.
import type { AccountSet } from '../accounts/account-set';
import { chooseAccount } from '../accounts/choose-account';
import { authFailureLimit } from '../callers/auth-failure-limit';
import { authenticate, requireScope } from '../callers/authenticate';
import type { CallerGuards } from '../callers/caller-guards';
import { type ClientRegistry, loadClientRegistry } from '../callers/client-registry';
import { cors } from '../callers/cors';
import { inboundAllowList } from '../callers/inbound-allow-list';
import { createOidcVerifier } from '../callers/oidc-verifier';
import { rateLimit } from '../callers/rate-limit';
import type { GatewayConfig } from '../config/gateway-config';
import { wholePrivateBlocks } from '../config/trust-proxy-coverage';
import { type AuthFailureLog, createAuthFailureLog } from '../observability/auth-failure-log';
import { type BuiltSessions, buildBrowserSessions } from '../sessions';
import type { RecordSeal, TokenStore } from '../tokens';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';
import type { Redis } from './redis';

export interface Callers {
  readonly guards: CallerGuards;
  readonly registry: ClientRegistry;
  /** Browser sessions, when they are on (SESSION_ISSUER, or local mode). */
  readonly browser?: BuiltSessions;
}

export function buildCallerGuards(
  config: GatewayConfig,
  redis: Redis,
  shared: { readonly store: TokenStore; readonly seal: RecordSeal },
  accounts: AccountSet,
  observability: Observability,
): Promise<Built<Callers>> {
  const { logger, metrics } = observability;
  return building((closers) => {
    const registry = loadClientRegistry(config.callers.clientsFile, {
      logger,
      watch: true,
      metrics,
      refuseDevelopmentKey: config.production,
      configuredAccounts: () => accounts.ids(),
      ssoClients: config.callers.oidc !== undefined,
    });
    closers.push(() => registry.close());
    closers.push(accounts.onSwap((ids) => warnClientsWithoutAccounts(registry, ids, logger)));
    warnWholePrivateBlocks(config.server.trustProxy, logger);
    warnHopCountBeforeAllowList(config.server.trustProxy, config.server.inboundAllowCidrs, logger);
    const failureLog = createAuthFailureLog({ logger });
    // Closed after the server (closers run in reverse), so the last interval's counts are written at shutdown.
    closers.push(() => failureLog.close());
    const browser = buildBrowserSessions({
      config,
      redis: redis.client,
      tokenStore: shared.store,
      seal: shared.seal,
      registry,
      logger,
    });
    return {
      guards: callerGuards(config, registry, redis, observability, failureLog, browser, accounts),
      registry,
      browser,
    };
  });
}

function callerGuards(
  config: GatewayConfig,
  registry: ClientRegistry,
  { client: redis, health }: Redis,
  { logger, metrics }: Observability,
  failureLog: AuthFailureLog,
  browser: BuiltSessions | undefined,
  accounts: AccountSet,
): CallerGuards {
  const { oidc } = config.callers;
  const counting = { redis, health, keyPrefix: config.redis.keyPrefix, metrics, logger };
  return {
    inboundAllowList: inboundAllowList(config.server.inboundAllowCidrs, failureLog),
    cors: cors({ origins: config.server.corsOrigins, registry }),
    authenticate: authenticate({
      registry,
      oidc: oidc
        ? createOidcVerifier({ ...oidc, registry, registeredClientsOnly: config.production, logger })
        : undefined,
      sessions: browser?.sessions,
      failures: authFailureLimit({ ...counting, ...config.callers.authFailureLimit, failureLog }),
    }),
    requireScope,
    rateLimit: rateLimit({ ...counting, defaultLimit: config.callers.defaultRateLimit }),
    chooseAccount: chooseAccount(accounts),
  };
}

/**
 * The accounts changed at run time (SPEC §10) and now number several: a registry entry without `accounts` is an
 * error the registry refuses at its next load, but the registry in use was valid when it was loaded. It is kept (a
 * reload must not stop every client), its callers without `accounts` get 403 (never an account by accident), and
 * this line names them so the operator fixes the registry.
 */
function warnClientsWithoutAccounts(
  registry: ClientRegistry,
  ids: ReadonlySet<string>,
  logger: Observability['logger'],
): void {
  if (ids.size < 2) return;
  const clients = registry.clientsWithoutAccounts();
  if (clients.length > 0)
    logger.error(
      { clients, accounts: [...ids] },
      'several provider accounts are configured and these clients list no "accounts": they are refused 403 until CLIENTS_FILE names the accounts each may use',
    );
}

/**
 * A hop count trusts whoever connects as the last proxy: a caller that reaches the gateway's port directly (not
 * through the load balancer) writes its own X-Forwarded-For and claims an address inside INBOUND_ALLOW_CIDRS. Safe
 * only while the network lets nothing but the proxies reach the port, which the gateway cannot see: said once at
 * start (found by the adversarial read of issue 42).
 */
function warnHopCountBeforeAllowList(
  trustProxy: GatewayConfig['server']['trustProxy'],
  inboundAllowCidrs: readonly string[],
  logger: Observability['logger'],
): void {
  if (typeof trustProxy !== 'number' || trustProxy === 0 || inboundAllowCidrs.length === 0) return;
  logger.warn(
    { trustProxy },
    "TRUST_PROXY is a hop count and INBOUND_ALLOW_CIDRS is set: a caller that reaches this port without the proxies can claim an allowed address; name the proxies' exact addresses, or let only them reach the port",
  );
}

/**
 * TRUST_PROXY trusts a whole private block (`uniquelocal`, 10.0.0.0/8): every workload of that network can write
 * its own X-Forwarded-For and so choose the address every limit, log line and allow-list sees. Allowed (a small
 * private network may hold only the proxies), but said once at start.
 */
function warnWholePrivateBlocks(
  trustProxy: GatewayConfig['server']['trustProxy'],
  logger: Observability['logger'],
): void {
  if (!Array.isArray(trustProxy)) return;
  const blocks = wholePrivateBlocks(trustProxy);
  if (blocks.length > 0)
    logger.warn(
      { blocks },
      "TRUST_PROXY trusts whole private blocks: any host there can forge X-Forwarded-For; name the proxies' exact addresses instead",
    );
}
