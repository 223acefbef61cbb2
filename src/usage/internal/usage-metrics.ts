// The usage and quota metrics (prom-client): written here only, from claims, flushes and warnings, never per request.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { QuotaEvent } from './quota-gate';
import { ROW_SEPARATOR } from './usage-ledger';
import type { LedgerGap } from './usage-report';

export interface UsageMetrics {
  quotaClaimed(event: QuotaEvent): void;
  quotaWarning(event: QuotaEvent, percent: number): void;
  quotaLocalShare(): void;
  ledgerFlush(result: 'ok' | 'failed'): void;
  counted(row: string, column: string, delta: number): void;
  webhook(result: 'delivered' | 'retried' | 'dropped'): void;
  storeReset(): void;
  quotaCounterLost(event: QuotaEvent): void;
}

export function registerUsageMetrics(
  registry: Registry,
  now: () => number = Date.now,
  gapsToday?: () => Promise<readonly LedgerGap[]>,
): UsageMetrics {
  const registers = [registry];
  const losses = registerLossMetrics(registers, gapsToday);
  // The last claim of each client, account and period, read when scraped: a period that has ended reads 0 even when
  // the client has not called since (no alert stays firing over a quota that has renewed).
  const lastClaims = new Map<string, QuotaEvent>();
  new Gauge({
    name: 'gateway_quota_used_ratio',
    help: 'Share of the quota the fleet has claimed in the current period (1 = used up), per client, account and period.',
    labelNames: ['client', 'account', 'period'] as const,
    registers,
    collect() {
      this.reset();
      const at = now();
      for (const event of lastClaims.values())
        this.set(
          { client: event.clientId, account: event.accountId, period: event.period },
          at >= event.periodEndsAt ? 0 : event.limit === 0 ? 1 : Math.min(1, event.used / event.limit),
        );
    },
  });
  const warnings = new Counter({
    name: 'gateway_quota_warnings_total',
    help: 'Quota thresholds (80, 100) announced by this replica (once per client, account, period and threshold for the fleet).',
    labelNames: ['client', 'account', 'period', 'threshold'] as const,
    registers,
  });
  const localShare = new Counter({
    name: 'gateway_quota_local_share_claims_total',
    help: "Quota leases granted from this replica's own share because the shared store did not answer.",
    registers,
  });
  const flushes = new Counter({
    name: 'gateway_usage_ledger_flushes_total',
    help: 'Writes of the usage ledger to the store, by result (ok, failed; a failed day is written again at the next flush).',
    labelNames: ['result'] as const,
    registers,
  });
  for (const result of ['ok', 'failed']) flushes.inc({ result }, 0);
  const calls = new Counter({
    name: 'gateway_usage_calls_total',
    help: 'Usage ledger counts written by this replica, per client, account, operation and column (billable, answers2xx, cacheHits, refused:<REASON>, ...).',
    labelNames: ['client', 'account', 'operation', 'column'] as const,
    registers,
  });
  const deliveries = new Counter({
    name: 'gateway_quota_webhook_deliveries_total',
    help: 'Quota webhook calls by result (delivered, retried, dropped).',
    labelNames: ['result'] as const,
    registers,
  });
  for (const result of ['delivered', 'retried', 'dropped']) deliveries.inc({ result }, 0);
  return {
    quotaClaimed: (event) => {
      lastClaims.set(`${event.clientId}\n${event.accountId}\n${event.period}`, event);
    },
    quotaWarning: (event, percent) =>
      warnings.inc({
        client: event.clientId,
        account: event.accountId,
        period: event.period,
        threshold: String(percent),
      }),
    quotaLocalShare: () => localShare.inc(),
    ledgerFlush: (result) => flushes.inc({ result }),
    counted: (row, column, delta) => {
      const [client = '', account = '', operation = ''] = row.split(ROW_SEPARATOR);
      calls.inc({ client, account, operation, column }, delta);
    },
    webhook: (result) => deliveries.inc({ result }),
    storeReset: () => losses.storeResets.inc(),
    quotaCounterLost: (event) =>
      losses.countersLost.inc({ client: event.clientId, account: event.accountId, period: event.period }),
  };
}

/** What the ledger and the quotas may have lost: resets found, counters lost, and today's gaps (read at scrape). */
function registerLossMetrics(registers: Registry[], gapsToday?: () => Promise<readonly LedgerGap[]>) {
  const storeResets = new Counter({
    name: 'gateway_usage_store_resets_total',
    help: 'Times this replica found its earlier ledger count missing from the store (a reset: a Redis restart without persistence, an eviction); `npm run usage` names the reset.',
    registers,
  });
  storeResets.inc(0);
  const countersLost = new Counter({
    name: 'gateway_quota_counters_lost_total',
    help: "Quota counters found missing mid-period (a reset store), per client, account and period; started again from this replica's count.",
    labelNames: ['client', 'account', 'period'] as const,
    registers,
  });
  if (gapsToday) {
    const gapReplicas = new Gauge({
      name: 'gateway_usage_ledger_gap_replicas',
      help: 'Replicas of today that stopped without their final write (SIGKILL, an OOM kill, a lost node).',
      registers,
    });
    // Read at scrape time (one HGETALL of today's ledger): replicas of today that stopped without their final write.
    new Gauge({
      name: 'gateway_usage_ledger_gap_calls',
      help: "Upper bound on the requests today's ledger may miss: replicas that stopped without their final write, each at its peak rate over the unwritten interval (the same in every replica: take max).",
      registers,
      async collect() {
        const gaps = await gapsToday().catch(() => undefined);
        if (!gaps) return;
        this.set(gaps.reduce((sum, gap) => sum + gap.bound, 0));
        gapReplicas.set(gaps.length);
      },
    });
  }
  return { storeResets, countersLost };
}
