// Metrics of the provider budgets (SPEC §11), by account and priority: part of createMetrics' registry.
import { Counter, Gauge, type Registry } from 'prom-client';

/** Every label value is bounded: account ids of the accounts file, the three priorities, three decisions. */
export function createBudgetMetrics(registers: Registry[]) {
  return {
    ...decisionMetrics(registers),
    effectiveRate: new Gauge({
      name: 'upstream_budget_effective_rate',
      help: "The fleet's rate for the account now, calls per second: min(configured budget, learned limit); +Inf when neither exists.",
      labelNames: ['account'] as const,
      registers,
    }),
    learnedRate: new Gauge({
      name: 'upstream_budget_learned_rate',
      help: "The limit the fleet learned from the provider's 429s without Retry-After (AIMD), calls per second; absent when none.",
      labelNames: ['account'] as const,
      registers,
    }),
    allocatedRate: new Gauge({
      name: 'upstream_budget_allocated_rate',
      help: "This replica's part of the account's rate, calls per second, by priority (its own bucket; higher priorities may also spend lower ones').",
      labelNames: ['account', 'priority'] as const,
      registers,
    }),
    pauses: new Counter({
      name: 'upstream_budget_pauses_total',
      help: "Pauses of the account started by a provider 429 with Retry-After (seen by this replica, its own or the fleet's).",
      labelNames: ['account'] as const,
      registers,
    }),
    paused: new Gauge({
      name: 'upstream_budget_paused',
      help: '1 while the account is paused after a provider 429 with Retry-After (until its probe succeeds), else 0.',
      labelNames: ['account'] as const,
      registers,
    }),
    decreases: new Counter({
      name: 'upstream_budget_decreases_total',
      help: "Provider 429s without a usable Retry-After that lowered the account's rate (AIMD), seen by this replica.",
      labelNames: ['account'] as const,
      registers,
    }),
    retryAfterIgnored: new Counter({
      name: 'upstream_budget_retry_after_ignored_total',
      help: 'Provider Retry-After values ignored (garbage, negative, past) or capped at UPSTREAM_RETRY_AFTER_MAX_SECONDS.',
      labelNames: ['account', 'why'] as const,
      registers,
    }),
    degraded: new Gauge({
      name: 'upstream_budget_degraded',
      help: '1 while this replica keeps to budget / replicas last seen while the shared budget store cannot be used.',
      labelNames: ['account'] as const,
      registers,
    }),
    storeFailures: new Counter({
      name: 'upstream_budget_store_failures_total',
      help: "Failed exchanges with the account's shared budget (each kept this replica on its own share).",
      labelNames: ['account'] as const,
      registers,
    }),
    replicas: new Gauge({
      name: 'upstream_budget_replicas',
      help: "Replicas sharing the account's budget at the last exchange (the divisor while the shared store cannot be used).",
      labelNames: ['account'] as const,
      registers,
    }),
  };
}

export type BudgetMetrics = ReturnType<typeof createBudgetMetrics>;

/**
 * The calls granted and refused. Grants are counted per call in plain numbers and added to the counter when it is
 * read: a prom-client increment validates and hashes its labels every time, which was most of what admitting a call
 * cost.
 */
function decisionMetrics(registers: Registry[]) {
  const beforeRead = new Set<() => void>();
  return {
    decisions: new Counter({
      name: 'upstream_budget_decisions_total',
      help: "Calls the account's provider budget let through (granted) or refused: exhausted (429 UPSTREAM_BUDGET_EXHAUSTED) or rate_limited (503 UPSTREAM_RATE_LIMITED, the account paused).",
      labelNames: ['account', 'priority', 'decision'] as const,
      registers,
      collect() {
        for (const flush of beforeRead) flush();
      },
    }),
    /** Runs `flush` before every read of upstream_budget_decisions_total (a scrape); returns how to stop. */
    flushDecisionsBeforeRead(flush: () => void): () => void {
      beforeRead.add(flush);
      return () => beforeRead.delete(flush);
    },
  };
}
