// Provider usage (SPEC §11): quotas per client and account (reserve before the provider, commit when billable),
// the usage ledger (counted in memory, written in batches) and the quota warnings. The public surface of src/usage/.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import type { UsageSettings } from '../config/gateway-config';
import {
  quotaCounterKey,
  quotaReplicasKey,
  quotaWarningKey,
  usageDayKey,
  usageStoreMarkerKey,
} from '../keys/redis-keys';
import type { RedisClient } from '../store/redis-connection';
import { utcDay } from './internal/calendar';
import { type LedgerStore, memoryLedgerStore, redisLedgerStore } from './internal/ledger-store';
import { memoryQuotaCounters, redisQuotaCounters } from './internal/quota-counters';
import { type QuotaEvent, QuotaGate, type QuotaLimits } from './internal/quota-gate';
import { memoryClaimOnce, quotaWarnings, redisClaimOnce } from './internal/quota-warnings';
import { QuotaWebhook } from './internal/quota-webhook';
import { UsageLedger } from './internal/usage-ledger';
import { registerUsageMetrics } from './internal/usage-metrics';
import { readGaps } from './internal/usage-report';

export { answerColumn, isBillableStatus } from './internal/billable';
export { assertTimeZone, type PeriodKind, periodAt, UnknownTimeZoneError } from './internal/calendar';
export type { LedgerStore, StoreMarker } from './internal/ledger-store';
export type {
  QuotaDecision,
  QuotaGate,
  QuotaLimits,
  QuotaRefusal,
  QuotaReservation,
} from './internal/quota-gate';
export { signatureHeader } from './internal/quota-webhook';
export type { UsageColumn, UsageLedger } from './internal/usage-ledger';
export { USAGE_COLUMNS } from './internal/usage-ledger';
export {
  daysBetween,
  type LedgerGap,
  readUsage,
  type UsageQuery,
  type UsageReport,
} from './internal/usage-report';

type LogFn = (fields: Record<string, unknown>, message: string) => void;

export interface UsageOptions {
  /** The shared Redis; absent in local mode (and with ALLOW_MEMORY_STORE): counters and ledger in memory. */
  readonly redis?: RedisClient;
  readonly keyPrefix: string;
  readonly settings: UsageSettings;
  /** The client's quota now (the registry's entry; it may be reloaded). */
  readonly limitsOf: (clientId: string) => QuotaLimits | undefined;
  readonly logger: { info: LogFn; warn: LogFn };
  /** Metrics registry (the gateway's); none in the CLI and some tests. */
  readonly registry?: Registry;
  readonly now?: () => number;
  readonly flushIntervalMs?: number;
  readonly replicaId?: string;
}

export interface Usage {
  readonly quotas: QuotaGate;
  readonly ledger: UsageLedger;
  /** Where the ledger is kept (the report reads it: `npm run usage`, the local web app). */
  readonly ledgerStore: LedgerStore;
  /** Gives leased units back, writes the ledger a last time, stops the webhook. */
  close(): Promise<void>;
}

/** The ledger as `npm run usage` reads it, from the same Redis as the gateway. */
export function usageLedgerStore(redis: RedisClient, keyPrefix: string): LedgerStore {
  return redisLedgerStore(redis, (day) => usageDayKey(keyPrefix, day), usageStoreMarkerKey(keyPrefix));
}

export function createUsage(options: UsageOptions): Usage {
  const { redis, keyPrefix, logger } = options;
  // One name per process start: the ledger's field and the quota's entry among the replicas seen.
  const replicaId = options.replicaId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const now = options.now ?? Date.now;
  const ledgerStore = redis ? usageLedgerStore(redis, keyPrefix) : memoryLedgerStore();
  const metrics = options.registry
    ? registerUsageMetrics(options.registry, now, () => readGaps(ledgerStore, utcDay(now()), now()))
    : undefined;
  const webhook = options.settings.webhook
    ? new QuotaWebhook({
        ...options.settings.webhook,
        onResult: (result, detail) => {
          metrics?.webhook(result);
          if (result !== 'delivered') logger.warn({ result, detail }, `quota webhook call ${result}`);
        },
      })
    : undefined;
  const onThreshold = quotaWarnings({
    claimOnce: redis ? redisClaimOnce(redis) : memoryClaimOnce(),
    warningKey: (event, percent) =>
      quotaWarningKey(
        keyPrefix,
        event.clientId,
        event.accountId,
        event.period,
        event.periodId,
        event.timeZone,
        percent,
      ),
    logger,
    webhook,
    onWarning: (event, percent) => metrics?.quotaWarning(event, percent),
  });
  const quotas = quotaGate(options, replicaId, onThreshold, metrics);
  let failing = false;
  const ledger = new UsageLedger({
    store: ledgerStore,
    retentionDays: options.settings.retentionDays,
    flushIntervalMs: options.flushIntervalMs,
    now: options.now,
    replicaId,
    onFlush: (result, error) => {
      metrics?.ledgerFlush(result);
      if (result === 'failed' && !failing)
        logger.warn(
          { err: (error as Error)?.message },
          'usage ledger write failed; counts kept, written again at the next flush',
        );
      if (result === 'ok' && failing) logger.info({}, 'usage ledger written again');
      failing = result === 'failed';
    },
    onCounted: metrics ? (_day, row, column, delta) => metrics.counted(row, column, delta) : undefined,
    onStoreReset: (at) => {
      metrics?.storeReset();
      logger.warn(
        { event: 'usage_store_reset', at: new Date(at).toISOString() },
        "usage ledger: the store no longer held this replica's earlier count (restarted without persistence, or evicted); figures before now are missing, `npm run usage` says so",
      );
    },
  });
  ledger.start();
  return {
    quotas,
    ledger,
    ledgerStore,
    async close() {
      await quotas.close();
      await ledger.close();
      webhook?.close();
    },
  };
}

/** The quota gate over the fleet's counters (Redis, or memory), its keys, warnings, outage log and metrics. */
function quotaGate(
  options: UsageOptions,
  replicaId: string,
  onThreshold: (event: QuotaEvent, threshold: number) => void,
  metrics: ReturnType<typeof registerUsageMetrics> | undefined,
): QuotaGate {
  const { redis, keyPrefix, logger } = options;
  return new QuotaGate({
    counters: redis ? redisQuotaCounters(redis) : memoryQuotaCounters(options.now),
    keyOf: (client, account, period, periodId, timeZone) =>
      quotaCounterKey(keyPrefix, client, account, period, periodId, timeZone),
    replicasKeyOf: (client, account) => quotaReplicasKey(keyPrefix, client, account),
    replicaId,
    limitsOf: options.limitsOf,
    now: options.now,
    onClaim: (event) => metrics?.quotaClaimed(event),
    onThreshold,
    onOutage: () =>
      logger.warn({}, "quota claims fall back to each replica's own share (the shared store did not answer)"),
    onLocalShare: (event, share) => {
      metrics?.quotaLocalShare();
      logger.warn(
        {
          client: event.clientId,
          account: event.accountId,
          period: event.period,
          limit: event.limit,
          claimed: event.used,
          replicas: share.replicas,
          share: share.units,
        },
        'quota: this replica keeps to its share of what was left (remaining / replicas last seen) until the shared store answers',
      );
    },
    onRecovery: () => logger.info({}, 'quota claims are shared by the fleet again'),
    onCounterLost: (event) => {
      metrics?.quotaCounterLost(event);
      logger.warn(
        {
          event: 'quota_counter_lost',
          client: event.clientId,
          account: event.accountId,
          period: event.period,
          periodId: event.periodId,
          restartedAt: event.used,
        },
        "quota counter missing mid-period (its store restarted without persistence, or evicted): started again from this replica's count; the fleet's figure may be low",
      );
    },
  });
}

export { requestUsageRecorder } from './request-usage';
