// The usage ledger's one hook in the request path: at the end of each request of a forwarded operation, what it
// cost the provider is read from what the account's forwarding and the plan reader left in res.locals.
import type { Request, Response } from 'express';
import type { Caller } from '../callers/caller';
import { answerColumn } from './internal/billable';
import type { UsageLedger } from './internal/usage-ledger';

/**
 * One place instead of a call at every outcome: each branch below is a Map increment, run once per request when
 * its answer is finished (the request log's 'close'). Requests of anonymous callers are not counted (no client).
 * A cache hit or a coalesced answer cost nothing; a provider answer counts in its class (the 401 before a retry
 * too) and, when billable, as `billable`; a timeout in `timeouts`; any other refusal as `refused:<REASON>`, with
 * the client's default account when the request never chose one (a 400 or 429 before the account guard).
 */
export function requestUsageRecorder(
  ledger: Pick<UsageLedger, 'record'>,
  /** The forwarded operations (the catalogue's, by operationId). */
  counted: Pick<ReadonlySet<string>, 'has'>,
  defaultAccountOf: (caller: Caller) => string | undefined,
): (req: Request, res: Response) => void {
  const record = (req: Request, res: Response): void => {
    const caller = req.caller;
    const locals = res.locals;
    const operation = locals.route;
    if (!caller || operation === undefined || !counted.has(operation)) return;
    const account = locals.account ?? defaultAccountOf(caller);
    if (account === undefined) return;
    const client = caller.id;
    // A replay of a kept answer (Idempotency-Key): no provider call, nothing billed, nothing to count.
    if (locals.replayed === true) return;
    const status = locals.upstreamStatus;
    if (status !== undefined) {
      // Two answers: the first was the 401 that the retry with a renewed token followed.
      if (locals.upstreamAnswers === 2) ledger.record(client, account, operation, 'answers4xx');
      ledger.record(client, account, operation, answerColumn(status));
      if (locals.billable) ledger.record(client, account, operation, 'billable');
      return;
    }
    if (locals.cache === 'hit') ledger.record(client, account, operation, 'cacheHits');
    else if (locals.coalesced === true) ledger.record(client, account, operation, 'coalesced');
    else if (locals.refusal === 'UPSTREAM_TIMEOUT') ledger.record(client, account, operation, 'timeouts');
    else if (locals.refusal !== undefined)
      ledger.record(client, account, operation, `refused:${locals.refusal}`);
    // Nothing known yet: the caller hung up while its provider call was out, or before it started (the call goes on,
    // detached from the caller). Counted when it ends (quotaGuarded), as the provider counts it.
    else locals.usagePending = () => record(req, res);
  };
  return record;
}
