// What a provider answer is for the ledger and the quota: its class, and whether the provider bills it.
import { billablePredicate } from '../../config/billable-statuses';

/** SPEC §11's default: 2xx, and 4xx other than 401, 403 and 429 (an account's `"billable"` may change the set). */
export const isBillableStatus: (status: number) => boolean = billablePredicate();

/**
 * The ledger column of a provider answer's class. A 3xx ends a call as a failure, like a 5xx (the gateway follows no
 * redirect: forwarding/internal/off-contract-answers.ts); a 1xx never ends one.
 */
export function answerColumn(status: number): 'answers2xx' | 'answers4xx' | 'answers5xx' {
  if (status >= 500 || (status >= 300 && status <= 399)) return 'answers5xx';
  if (status >= 400) return 'answers4xx';
  return 'answers2xx';
}
