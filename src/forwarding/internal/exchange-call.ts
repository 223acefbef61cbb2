// What one forwarded exchange is, whichever way its answer travels: read (buffered over the account's undici pool)
// or piped to the caller as it arrives (http-proxy-middleware over the account's agent). The forwarder's flow
// (budget, token, slots, circuit, the 401 retry, the ledger's fields) runs on this shape for both.
import { UpstreamFailure } from './circuit-breaker';

/** An upstream answer, buffered (bodies are small JSON): it can be replayed to coalesced callers or cached. */
export interface UpstreamAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export interface UpstreamExchange {
  /** Metric/log label of the operation. */
  readonly route: string;
  /** The exact upstream path; built by the route from validated parameters (never the caller's raw URL). */
  readonly path: string;
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The sanitized body, serialized once. */
  readonly body?: Buffer;
  /** The operation's own timeout (x-gateway.timeoutMs), else the account's. */
  readonly timeoutMs?: number;
  /** Sent upstream as Idempotency-Key: only for an operation whose provider honours it (SPEC §13). */
  readonly idempotencyKey?: string;
}

/** One forwarded exchange over all its attempts, as the forwarder's flow keeps it. */
export interface ExchangeCall {
  readonly exchange: UpstreamExchange;
  /** The complete upstream header set (header-policy.ts), never the caller's; each attempt sets its token. */
  readonly headers: Record<string, string>;
  /** Time spent waiting on the upstream (all attempts), for the request log. */
  upstreamMs: number;
  /** The status of the provider's last answer (0: none yet) and how many it gave, for the usage ledger. */
  lastStatus: number;
  answers: number;
  /** The call ended on a provider answer: the last attempt made was answered (not cut, timed out or refused after). */
  lastAnswered: boolean;
  /** Budget units granted and not yet spent on an attempt: given back if the exchange ends without sending. */
  budgetHeld: number;
}

/**
 * How one attempt ended well: a read answer; a 401 (the token is dead: renewed once, retried once); or an answer being
 * piped to the caller, `done` once the pipe ended (the answer complete, cut, or the caller gone).
 */
export type AttemptOutcome =
  | { readonly kind: 'answer'; readonly answer: UpstreamAnswer }
  | { readonly kind: 'unauthorized' }
  | { readonly kind: 'piped'; readonly status: number; readonly done: Promise<void> };

/** One upstream attempt of a call with `accessToken`: an outcome, or a rejection (UpstreamFailure, a GatewayError). */
export type AttemptSender<C extends ExchangeCall> = (call: C, accessToken: string) => Promise<AttemptOutcome>;

/** Where an attempt started, for the duration it is observed with. */
export interface AttemptTiming<C extends ExchangeCall = ExchangeCall> {
  readonly call: C;
  readonly startedAt: number;
}

/**
 * The usage ledger's and the request log's fields of a call (usage/request-usage.ts reads them when the caller's
 * answer closes): its time on the upstream, and the provider's last answer when it gave one.
 */
export function noteUpstreamFields(locals: Record<string, unknown>, call: ExchangeCall): void {
  if (call.upstreamMs > 0) locals.upstreamMs = Math.round(call.upstreamMs * 10) / 10;
  if (call.answers > 0) {
    locals.upstreamStatus = call.lastStatus;
    locals.upstreamAnswers = call.answers;
    locals.upstreamAnswered = call.lastAnswered;
  }
}

/**
 * An attempt starts: the call's last answer is no longer this one's, and one budget unit granted for the call is spent
 * on it. True when a unit was spent (the attempt holds it: held again if the attempt is never sent).
 */
export function startAttempt(call: ExchangeCall): boolean {
  call.lastAnswered = false;
  if (call.budgetHeld === 0) return false;
  call.budgetHeld -= 1;
  return true;
}

/** An attempt that failed before it was handed to a socket: the provider never saw it, its unit is held again. */
export function keepUnsentUnit(call: ExchangeCall, spentUnit: boolean, error: unknown): void {
  if (spentUnit && error instanceof UpstreamFailure && error.notSent) call.budgetHeld += 1;
}
