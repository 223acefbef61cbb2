// Provider budgets standing for replicas: each with its own Redis connection, health judge and subscriber.
import { Redis } from 'ioredis';
import pino from 'pino';
import { createProviderBudget, createRedisBudgetStore, type ProviderBudget } from '../../src/budget';
import { accountBudgetSchema } from '../../src/config/budget-schema';
import { budgetKeys } from '../../src/keys/redis-keys';
import { createMetrics } from '../../src/observability/metrics';
import { createRedisHealth } from '../../src/store/redis-health';
import { createRedisTokenStore } from '../../src/store/redis-token-store';
import { type Clock, systemClock } from '../../src/tokens';
import { waitFor } from './ports';

const quiet = pino({ level: 'silent' });

export interface BudgetReplica {
  readonly budget: ProviderBudget;
  /** The replica's Redis-health owner (what /readyz reads). */
  readonly health: { healthy(): boolean };
  close(): Promise<void>;
}

/** A replica's budget for `accountId` on the Redis at `url` (`requestsPerSecond` undefined: no configured budget). */
export async function budgetReplica(
  url: string,
  accountId: string,
  requestsPerSecond: number | undefined,
  waitMs = 200,
  burst?: number,
  /** This replica's clock (a skewed host's, in the clock-skew test). */
  clock: Clock = systemClock,
): Promise<BudgetReplica> {
  // The gateway's fail-fast settings (src/store/redis-connection.ts): no offline queue, a short command timeout.
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 1_000,
  });
  client.on('error', () => undefined);
  await waitFor(() => client.status === 'ready', { what: 'redis ready' });
  const metrics = createMetrics();
  const health = createRedisHealth(client, quiet, metrics);
  const channels = createRedisTokenStore({ client, logger: quiet });
  const keys = budgetKeys('budget-test:', accountId);
  const budget = createProviderBudget({
    accountId,
    settings:
      requestsPerSecond === undefined ? undefined : accountBudgetSchema.parse({ requestsPerSecond, burst }),
    waitMs,
    retryAfterMaxSeconds: 120,
    probeLeaseMs: 5_000,
    store: createRedisBudgetStore({ redis: client, key: keys.fleet, channel: keys.channel, channels }),
    health,
    clock,
    logger: quiet,
    metrics: metrics.budget,
  });
  return {
    budget,
    health,
    async close() {
      await budget.close();
      await channels.close();
      client.disconnect();
    },
  };
}
