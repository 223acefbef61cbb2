// What the gateway's middleware attaches to Express requests, and what handlers leave for the request log.
import type { Logger } from 'pino';
import type { Caller } from '../callers/caller';
import type { AccountForwarding } from '../forwarding';
import type { TokenSource } from '../tokens';

declare global {
  namespace Express {
    interface Request {
      /** The X-Request-Id of this exchange (kept from the caller when well-formed, else generated). */
      id: string;
      log: Logger;
      caller?: Caller;
      /** The provider account this request uses (SPEC §10), chosen once after authentication. */
      account?: AccountForwarding;
    }

    /** Request-scoped values `res.locals` carries to the request log line and the metric labels. */
    interface Locals {
      /** The route template (never the raw path), so metric labels stay bounded; `unmatched` when absent. */
      route?: string;
      /** No request log line: a probe, or the failure log's aggregated line speaks for this request. */
      quiet?: boolean;
      /** Time the upstream took to answer, in ms (one decimal). */
      upstreamMs?: number;
      /** The id of the provider account the request used (X-Upstream-Account), for the log line and the trace. */
      account?: string;
      /** Where the upstream token of this call came from. */
      tokenSource?: TokenSource;
      /** The status of the provider's last answer to this request (absent: no provider answer). */
      upstreamStatus?: number;
      /** How many answers the provider gave this request: 2 when a 401 was retried with a renewed token. */
      upstreamAnswers?: number;
      /** The call ended on the provider's answer `upstreamStatus` (false: its last attempt was cut, timed out, or a
       * refusal came after a 401): what decides whether it is billable. */
      upstreamAnswered?: boolean;
      /** The provider budget refused the call (absent when granted, the common case). */
      budget?: 'exhausted' | 'rate_limited';
      /** The caller's priority in the budget, logged with a refusal. */
      priority?: string;
      /** A provider call was made and the final answer is billable (SPEC §11); absent when no call was made. */
      billable?: boolean;
      /** The quota period that refused the call (429 QUOTA_EXCEEDED). */
      quotaPeriod?: 'day' | 'month';
      /** The gateway refused the request with this reason (set by the error envelope, read by the usage ledger). */
      refusal?: string;
      /** The plan read shared another caller's upstream call. */
      coalesced?: boolean;
      /**
       * The caller hung up before anything the usage ledger counts was known: the ledger's count of this request,
       * run by the account's forwarder once a provider call it may still make has ended (the provider bills it).
       */
      usagePending?: () => void;
      /** The answer is the one kept for this Idempotency-Key, replayed without a provider call (SPEC §13). */
      replayed?: boolean;
      /** The provider call may have reached the provider and no answer came (timeout, connection lost after it was
       * sent): its outcome is unknown (SPEC §13). */
      upstreamUnknown?: boolean;
      /** The plan answer came from the short answer cache. */
      cache?: 'hit';
      /** The id of this request's trace, for the request log line (only while tracing is on). */
      traceId?: string;
      /** The validated document: country, type and a keyed reference, never a character of the id. */
      document?: { readonly country: string; readonly type: string; readonly ref: string };
    }
  }
}
