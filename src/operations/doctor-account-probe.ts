// The doctor's probes of one provider account: the fleet's back-off for its credentials (read from the token store
// through the token manager's own code), one login from the account's egress address, a refusal shared.
import { pino } from 'pino';
import { fetchFleetView } from '../budget';
import type { AccountSpec } from '../config/account-spec';
import type { GatewayConfig } from '../config/gateway-config';
import { deriveKey } from '../keys/derived-keys';
import { budgetKeys } from '../keys/redis-keys';
import { createRedisClient, type RedisClient } from '../store/redis-connection';
import { createRedisTokenStore } from '../store/redis-token-store';
import {
  createCredentialSource,
  createFleetBackoffView,
  createRecordSeal,
  createTokenCipher,
  type FleetBackoffView,
} from '../tokens';
import type { AccountProbe } from './doctor';
import type { BackoffCheck } from './doctor-backoff';
import type { BudgetCheck } from './doctor-budget';
import { requestUpstreamToken, untilReady } from './doctor-checks';

const silent = pino({ enabled: false });

/** Without Redis there is nothing shared to read: each replica keeps its back-off in its own memory. */
function unsharedReason(config: GatewayConfig): string {
  return config.mode === 'local'
    ? 'none to read (local mode: no shared store)'
    : "no shared store (no Redis): each replica backs off on its own, out of the doctor's sight";
}

/** Without Redis each replica keeps the budget in its own memory: the whole budget each (local mode, one process). */
function budgetUnshared(config: GatewayConfig): string {
  return config.mode === 'local'
    ? 'kept in the process (local mode: no shared store)'
    : "no shared store (no Redis): each replica keeps the whole budget in its own memory, out of the doctor's sight";
}

/** `label` replaces the URL in the report (local mode: "the bundled simulator"). */
export async function probeAccount(
  config: GatewayConfig,
  account: AccountSpec,
  label?: string,
): Promise<AccountProbe> {
  const encryptionKey = config.tokens.encryptionKey;
  // Fingerprinted as the gateway does, so the refusal record of these very credentials is recognised.
  const credentials = await createCredentialSource(account.credentials, {
    logger: silent,
    pollIntervalMs: 0,
    fingerprintKey: encryptionKey && deriveKey(encryptionKey, 'credential-fingerprint'),
  });
  const store = await connectedView(config, account, credentials.current());
  return {
    async readBackoff(): Promise<BackoffCheck> {
      if (!store) return { kind: 'unshared', reason: unsharedReason(config) };
      return store.view ? store.view.read() : { kind: 'unknown' };
    },
    requestToken() {
      const { username, password } = credentials.current();
      return requestUpstreamToken(
        { baseUrl: account.baseUrl, label, username, password },
        {
          timeoutMs: account.timeoutMs,
          headers: account.staticHeaders,
          extraCa: account.extraCa,
          localAddress: account.localAddress,
        },
      );
    },
    async shareRefusal(reason) {
      return store?.view?.shareRefusal(reason);
    },
    async readBudget(): Promise<BudgetCheck> {
      if (!store) return { kind: 'unshared', reason: budgetUnshared(config) };
      if (!store.client) return { kind: 'unknown', problem: 'Redis did not answer' };
      const key = budgetKeys(config.redis.keyPrefix, account.id).fleet;
      try {
        const maxPauseMs = config.upstream.budget.retryAfterMaxSeconds * 1000;
        return { kind: 'fleet', view: await fetchFleetView(store.client, key, maxPauseMs) };
      } catch (error) {
        return { kind: 'unknown', problem: (error as Error).message.slice(0, 120) };
      }
    },
    async close() {
      credentials.close();
      await store?.close();
    },
  };
}

/**
 * The back-off view over the fleet's Redis, or undefined without Redis; `view` is undefined when Redis did not
 * become ready (the back-off is then unknown, never assumed clear).
 */
async function connectedView(
  config: GatewayConfig,
  account: AccountSpec,
  credentials: Parameters<typeof createFleetBackoffView>[0]['credentials'],
): Promise<{ view?: FleetBackoffView; client?: RedisClient; close(): Promise<void> } | undefined> {
  const client = createRedisClient(config.redis, { retry: false });
  if (!client) return undefined;
  let lastError: string | undefined;
  client.on('error', (error: Error & { code?: string }) => {
    lastError = error.code ?? error.message;
  });
  const close = async () => {
    client.disconnect();
  };
  try {
    await untilReady(client, () => lastError);
  } catch {
    return { close };
  }
  const view = createFleetBackoffView({
    store: createRedisTokenStore({ client, logger: silent }),
    seal: createRecordSeal(createTokenCipher(config.tokens.encryptionKey), { inc: () => undefined }),
    credentials,
    logger: silent,
    settings: {
      upstreamBaseUrl: account.baseUrl,
      keyPrefix: config.redis.keyPrefix,
      loginMinIntervalMs: config.tokens.loginMinIntervalMs,
      loginMaxIntervalMs: config.tokens.loginMaxIntervalMs,
    },
  });
  return { view, client, close };
}
