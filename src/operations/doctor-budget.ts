// The doctor's reading of one account's provider budget as the fleet shares it: the configured and effective rates,
// the live replicas' holds, a pause and its probe. Informative: it never fails the report (see diagnoseBudget).
import type { FleetView } from '../budget';
import type { AccountSpec } from '../config/account-spec';
import { formatDuration } from './doctor-backoff';

/** The fleet's budget record as the doctor could read it, or why not. */
export type BudgetCheck =
  | { readonly kind: 'fleet'; readonly view: FleetView }
  | { readonly kind: 'unshared'; readonly reason: string }
  | { readonly kind: 'unknown'; readonly problem: string };

export interface BudgetStep {
  readonly title: string;
  readonly state: 'pass' | 'warn';
  readonly detail: string;
  readonly fix?: string;
}

export const budgetTitle = (account: Pick<AccountSpec, 'id'>) => `provider budget (account ${account.id})`;

const rate = (n: number) => `${Number(n.toFixed(2))}/s`;

/**
 * The step line. Never `fail`: the budget's state is the provider's answer (a pause it asked for, a rate it taught)
 * or the fleet's load, not a fault of this deployment that the operator could fix before starting; the doctor's exit
 * code stays about configuration, credentials and reachability. A pause, or a learned rate below the configured
 * one, is a warning: the provider is refusing calls, which explains 503 UPSTREAM_RATE_LIMITED / 429 answers.
 */
export function diagnoseBudget(check: BudgetCheck, account: Pick<AccountSpec, 'id' | 'budget'>): BudgetStep {
  const title = budgetTitle(account);
  const configured = account.budget?.requestsPerSecond;
  const configuredText =
    configured === undefined
      ? 'none configured (unbounded until the provider answers 429)'
      : rate(configured);
  if (check.kind === 'unshared')
    return { title, state: 'pass', detail: `configured ${configuredText}; ${check.reason}` };
  if (check.kind === 'unknown')
    return {
      title,
      state: 'warn',
      detail: `configured ${configuredText}; the fleet's record could not be read (${check.problem})`,
    };
  const { view } = check;
  const learned = view.learnedRate;
  const effective =
    learned === undefined ? configured : configured === undefined ? learned : Math.min(configured, learned);
  const held = view.replicas.reduce((sum, replica) => sum + replica.hold, 0);
  const parts = [
    `configured ${configuredText}`,
    `effective ${effective === undefined ? 'unbounded' : rate(effective)}${
      learned !== undefined ? ` (learned from the provider's 429s: ${rate(learned)})` : ''
    }`,
    view.found
      ? `${view.replicas.length} live replica${view.replicas.length === 1 ? '' : 's'} holding ${rate(held)}${
          effective ? ` (${Math.round((held / effective) * 100)} % of the effective rate)` : ''
        }`
      : 'no replica has exchanged lately (no record)',
  ];
  if (view.pausedForMs !== undefined) {
    const probe = view.probeForMs !== undefined ? '; a probe is out' : '';
    return {
      title,
      state: 'warn',
      detail: `${parts.join('; ')}; PAUSED for ${formatDuration(view.pausedForMs)} more (the provider's Retry-After)${probe}`,
      fix: "callers get 503 UPSTREAM_RATE_LIMITED until the pause ends and one probe succeeds; lower the fleet's load or ask the provider for a higher limit",
    };
  }
  if (view.probeForMs !== undefined) parts.push('the pause has ended, its probe is out');
  if (learned !== undefined && (configured === undefined || learned < configured))
    return {
      title,
      state: 'warn',
      detail: parts.join('; '),
      fix: `the provider answered 429 without Retry-After: the fleet keeps to ${rate(learned)} and climbs back${
        configured !== undefined ? ` to the configured ${rate(configured)}` : ''
      }; if the provider's limit is lower than configured, set "budget" to it`,
    };
  return { title, state: 'pass', detail: parts.join('; ') };
}
