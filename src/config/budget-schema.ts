// The provider budget of one account as the accounts file writes it (SPEC §11), and the callers' priorities.
import { z } from 'zod';

/** From the first to be cut when demand exceeds the budget to the last. */
export const PRIORITIES = ['sheddable', 'standard', 'critical'] as const;
export type Priority = (typeof PRIORITIES)[number];
export const DEFAULT_PRIORITY: Priority = 'standard';

export const DEFAULT_SHARES: Readonly<Record<Priority, number>> = {
  sheddable: 0.5,
  standard: 0.8,
  critical: 1,
};

/** The highest budget accepted: far above any provider's documented limit, low enough to stay exact in floats. */
export const MAX_REQUESTS_PER_SECOND = 1_000_000;
/**
 * The lowest: 0.01 (36 calls an hour). Fractional rates are meaningful: a provider that allows 30 calls a minute
 * has a budget of 0.5 per second; the fleet spends it one call at a time (burst at least 1).
 */
export const MIN_REQUESTS_PER_SECOND = 0.01;
/**
 * Without `burst`, the fleet may send a twentieth of a second of budget at once: the fleet then sends at most the
 * budget + 5 % in any second (docs/provider-budget.md, the bound), however the calls bunch up.
 */
export const DEFAULT_BURST_SECONDS = 0.05;

const share = z
  .number({ error: 'must be a number' })
  .gt(0, 'must be above 0 (a priority that may never call is a registry matter, not a share)')
  .max(1, 'must be at most 1 (the whole budget)');

export const budgetSharesSchema = z
  .strictObject({
    sheddable: share.default(DEFAULT_SHARES.sheddable),
    standard: share.default(DEFAULT_SHARES.standard),
    critical: share.default(DEFAULT_SHARES.critical),
  })
  .refine((s) => s.sheddable <= s.standard && s.standard <= s.critical, {
    message:
      'must keep sheddable <= standard <= critical (a lower priority never gets more than a higher one)',
  })
  .meta({ description: 'The part of the budget each priority may use at most when demand exceeds it.' });

export const accountBudgetSchema = z
  .strictObject({
    requestsPerSecond: z
      .number({ error: 'must be a number' })
      .gt(0, 'must be above 0 (to stop calling an account, remove it from the file)')
      .min(MIN_REQUESTS_PER_SECOND, `must be at least ${MIN_REQUESTS_PER_SECOND}`)
      .max(MAX_REQUESTS_PER_SECOND, `must be at most ${MAX_REQUESTS_PER_SECOND}`)
      .meta({
        description: "The provider's limit for the whole fleet, in calls per second (may be fractional).",
      }),
    burst: z
      .number({ error: 'must be a number' })
      .int('must be a whole number of calls')
      .min(1, 'must be at least 1')
      .max(MAX_REQUESTS_PER_SECOND, `must be at most ${MAX_REQUESTS_PER_SECOND}`)
      .optional()
      .meta({
        description:
          'Calls the fleet may send at once after a quiet moment, on top of the rate in any second (default: a twentieth of a second of budget, at least 1).',
      }),
    shares: budgetSharesSchema.optional(),
  })
  .transform((b) => ({
    requestsPerSecond: b.requestsPerSecond,
    burst: b.burst ?? Math.max(1, Math.ceil(b.requestsPerSecond * DEFAULT_BURST_SECONDS)),
    shares: b.shares ?? { ...DEFAULT_SHARES },
  }))
  .meta({
    description:
      "The provider's request limit for this account across the whole fleet: requestsPerSecond with a burst and the priorities' shares.",
  });

export type AccountBudget = z.output<typeof accountBudgetSchema>;

export const prioritySchema = z.enum(PRIORITIES, { error: `must be one of ${PRIORITIES.join(', ')}` });
