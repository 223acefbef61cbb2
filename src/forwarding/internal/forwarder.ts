// Forwards one validated exchange to the upstream: token injection, header hygiene, timeout, circuit breaker, the
// single retry after a 401 and the single retry of an idempotent call. An answer the gateway reads (filtered, cached,
// coalesced, kept for a replay) is fetched over the account's undici pool and buffered; an answer of an
// `answer: "stream"` operation is piped to the caller through http-proxy-middleware (piped-attempt.ts). Both kinds of
// attempt run in the same flow.
import type { Agent, IncomingHttpHeaders } from 'node:http';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../../http/gateway-error';
import type { Metrics } from '../../observability/metrics';
import { NO_TRACING, type Tracing } from '../../observability/tracing';
import { bindFailureOf } from '../../tls/local-address';
import { tlsFailureOf } from '../../tls/tls-failure';
import type { TokenProvider, TokenSource } from '../../tokens';
import {
  CircuitOpenError,
  type UpstreamCircuit,
  type UpstreamCircuits,
  UpstreamFailure,
} from './circuit-breaker';
import {
  type AttemptOutcome,
  type AttemptSender,
  type AttemptTiming,
  type ExchangeCall,
  keepUnsentUnit,
  noteUpstreamFields,
  startAttempt,
  type UpstreamAnswer,
  type UpstreamExchange,
} from './exchange-call';
import { ANSWER_HEADERS, allowedAnswerHeaders, upstreamRequestHeaders } from './header-policy';
import {
  actedAndRedirected,
  FOREIGN_REFUSAL_MESSAGE,
  isForeignRefusal,
  isRedirect,
  OffContractAnswer,
  REDIRECT_MESSAGE,
  redirectFields,
} from './off-contract-answers';
import { createPipedAttempts, PipedCall } from './piped-attempt';
import type { UpstreamSlots } from './upstream-slots';

export type { UpstreamAnswer, UpstreamExchange } from './exchange-call';

export interface ForwarderDeps {
  readonly baseUrl: string;
  /** The account's connections (upstream-pool.ts): every attempt whose answer is read is dispatched on it. */
  readonly pool: Dispatcher;
  /** The account's http(s) Agent (upstream-agent.ts) for piped answers (`answer: "stream"`); absent: none served. */
  readonly streamAgent?: Agent;
  /** The bounded wait for one of the pool's connections (its limit is the pool's size). */
  readonly slots: UpstreamSlots;
  readonly tokens: TokenProvider;
  /** One circuit per operation, chosen by the exchange's route. */
  readonly circuits: UpstreamCircuits;
  readonly timeoutMs: number;
  readonly staticHeaders: Readonly<Record<string, string>>;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Largest upstream answer the gateway buffers; larger ones are treated as an upstream failure. */
  readonly maxAnswerBytes?: number;
  /** Spans of the token acquisition and of each upstream attempt. */
  readonly tracing?: Tracing;
  /** The account's provider budget (SPEC §11): asked before every provider call, told of every answer. */
  readonly budget?: ForwarderBudget;
  /** UPSTREAM_RETRY_AFTER_MAX_SECONDS: a provider's Retry-After reaches the caller at most this long (default 120). */
  readonly retryAfterMaxSeconds?: number;
}

type Priority = 'critical' | 'standard' | 'sheddable';

/** A refusal of the provider budget: never sent, answered with Retry-After. */
type BudgetRefusal = {
  readonly granted: false;
  readonly reason: 'UPSTREAM_BUDGET_EXHAUSTED' | 'UPSTREAM_RATE_LIMITED';
  readonly retryAfterSeconds: number;
};
type BudgetAdmission = { readonly granted: true } | BudgetRefusal;

/** What the forwarder needs of src/budget's ProviderBudget (structural: forwarding does not depend on budget). */
export interface ForwarderBudget {
  /** A wait comes as a Promise; its `cancel()`, when there, ends the wait (the caller left). */
  admit(priority?: Priority): BudgetAdmission | (Promise<BudgetAdmission> & { cancel?(): void });
  observe(status: number, retryAfter?: string | readonly string[] | number): void;
  /** A granted call that never reached the provider: its unit comes back. */
  giveBack?(priority?: Priority): void;
}

export interface Forwarder {
  /** The answer, read whole (at most maxAnswerBytes). */
  forward(req: Request, res: Response, exchange: UpstreamExchange): Promise<UpstreamAnswer>;
}

/** The account's forwarder for `answer: "stream"` operations. */
export interface StreamForwarder {
  /**
   * Pipes the provider's answer to `res` as it arrives (`answer: "stream"`): settles once the answer ended (complete,
   * cut, or the caller gone). Rejects, nothing written, when there is no answer to pipe (refused, 401 twice, 403, 5xx,
   * timeout before the head, connection failure). `beforeHead` runs once the final answer's head is in and the ledger's
   * fields are set, before anything is written.
   */
  stream(req: Request, res: Response, exchange: UpstreamExchange, beforeHead?: () => void): Promise<void>;
}

/** One forwarded exchange over all its attempts, read over the pool: built once per exchange. */
class Call implements ExchangeCall {
  upstreamMs = 0;
  lastStatus = 0;
  answers = 0;
  lastAnswered = false;
  budgetHeld = 0;

  constructor(
    readonly exchange: UpstreamExchange,
    /** The upstream request's path: the base URL's own path, then the exchange's. */
    readonly path: string,
    /** The complete upstream header set (header-policy.ts), never the caller's; each attempt sets its token. */
    readonly headers: Record<string, string>,
  ) {}
}

/** What ends an attempt, shared by every attempt of a forwarder (its metrics, budget, logger). */
interface AttemptEnds {
  readonly maxAnswerBytes: number;
  answered(attempt: Attempt): void;
  failed(attempt: Attempt, error: Error): void;
}

/** The answer was larger than the gateway buffers: the socket is dropped, the call fails. */
class AnswerTooLargeError extends Error {
  readonly code = 'UPSTREAM_ANSWER_TOO_LARGE';
}

/** An attempt settled (timed out) before its request could be written: it is never sent. */
class AttemptSettledError extends Error {
  readonly code = 'ATTEMPT_SETTLED';
}

/**
 * One upstream attempt, and undici's handler for it: the pool calls it back as the request leaves and the answer
 * arrives. The answer is buffered (bodies are small JSON, at most `maxAnswerBytes`) so that it can be filtered,
 * cached, shared with coalesced readers or kept for a replay.
 */
class Attempt implements Dispatcher.DispatchHandler {
  timer: NodeJS.Timeout | undefined = undefined;
  /** Known once the pool writes the request on a socket (it may first connect). */
  controller: Dispatcher.DispatchController | undefined = undefined;
  timedOut = false;
  settled = false;
  /** A budget unit was spent on this attempt: it comes back if the request is never handed to a connection. */
  spentUnit = false;
  status = 0;
  answerHeaders: IncomingHttpHeaders = {};
  chunks: Buffer[] = [];
  size = 0;

  constructor(
    readonly call: Call,
    readonly startedAt: number,
    private readonly ends: AttemptEnds,
    readonly resolve: (outcome: AttemptOutcome) => void,
    readonly reject: (error: unknown) => void,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Settled (timed out) while connecting: never send it. Thrown, not `controller.abort()`: undici then drops the
    // request from its queue and keeps the connection just made for the next call (an abort destroys the socket).
    if (this.settled) throw new AttemptSettledError('attempt settled before it was sent');
    this.controller = controller;
  }

  /** The request was handed to a connection (undici calls onRequestStart right before writing it). */
  get sent(): boolean {
    return this.controller !== undefined;
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.status = statusCode;
    this.answerHeaders = headers;
    this.chunks = [];
    this.size = 0;
    if (Number(headers['content-length']) > this.ends.maxAnswerBytes)
      controller.abort(new AnswerTooLargeError('upstream answer too large'));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.ends.maxAnswerBytes) {
      controller.abort(new AnswerTooLargeError('upstream answer too large'));
      return;
    }
    this.chunks.push(chunk);
  }

  /** The whole answer arrived (undici fails a body cut short: fewer bytes than Content-Length, unfinished chunks). */
  onResponseEnd(): void {
    this.ends.answered(this);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.ends.failed(this, error);
  }

  /** The buffered body, joined once. */
  body(): Buffer {
    return this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.size);
  }
}

const UNAUTHORIZED: AttemptOutcome = { kind: 'unauthorized' };

const RATE_LIMITED_DETAIL =
  'The provider asked the gateway to slow down; calls to this account resume after the Retry-After seconds.';

const RETRYABLE_CONNECTION_ERRORS = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ECONNABORTED']);
/** Connection failures before any byte of the request could leave: the provider never saw it. */
const NEVER_CONNECTED = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'EADDRINUSE',
]);

/** An answer body in a content coding other than identity (gzip, br, ...). */
function encoded(headers: IncomingHttpHeaders): boolean {
  const coding = headers['content-encoding'];
  return coding !== undefined && String(coding).trim().toLowerCase() !== 'identity';
}

/**
 * The code a failed attempt is known by: the socket's own (ECONNREFUSED, a TLS code, ...), or undici's. undici reports
 * a connection the upstream closed or reset mid-call as UND_ERR_SOCKET: named ECONNRESET here, as Node's http does.
 */
function connectionCode(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'UND_ERR_SOCKET') return 'ECONNRESET';
  return code ?? 'unknown';
}

/**
 * The call may have reached the provider with no answer back (SPEC §13's unknown outcome): a timeout, or a connection
 * lost other than one never made (refused, unresolved, unreachable, a TLS handshake refused); never one that ended
 * before its request was handed to a connection (a connect outliving the timeout, a request undici refused).
 */
function mayHaveReachedProvider(error: unknown): boolean {
  if (!(error instanceof UpstreamFailure) || error.notSent) return false;
  if (error.kind === 'timeout') return true;
  if (error.kind !== 'connection') return false;
  const code = error.code ?? '';
  return !NEVER_CONNECTED.has(code) && !/CERT|TLS|SELF_SIGNED|UNABLE_TO/.test(code);
}

export function createForwarder(deps: ForwarderDeps): Forwarder & StreamForwarder {
  const maxAnswerBytes = deps.maxAnswerBytes ?? 1024 * 1024;
  const retryAfterMaxSeconds = deps.retryAfterMaxSeconds ?? 120;
  const tracing = deps.tracing ?? NO_TRACING;
  // Made once, not per request: with traces off the span wrapper only calls it.
  const getAccessToken = () => deps.tokens.getAccessToken();

  const basePath = new URL(deps.baseUrl).pathname.replace(/\/$/, '');

  const settle = (attempt: Attempt) => {
    attempt.settled = true;
    clearTimeout(attempt.timer);
  };
  const fail = (attempt: Attempt, error: UpstreamFailure) => {
    if (attempt.settled) return;
    settle(attempt);
    keepUnsentUnit(attempt.call, attempt.spentUnit, error);
    attempt.reject(error);
  };

  const ends: AttemptEnds = {
    maxAnswerBytes,
    answered(attempt) {
      if (attempt.settled) return;
      settle(attempt);
      const { status } = attempt;
      answered(attempt, status, attempt.answerHeaders['retry-after']);
      if (status === 401) attempt.resolve(UNAUTHORIZED);
      else if (status === 403) attempt.reject(ipRefused());
      else if (status >= 500) attempt.reject(new UpstreamFailure('status'));
      else if (offContractAnswer(attempt, status)) return;
      else if (encoded(attempt.answerHeaders)) {
        // Compressed despite `Accept-Encoding: identity`: the gateway could neither filter it nor pass it on whole.
        deps.logger.warn(
          { route: attempt.call.exchange.route, status },
          'upstream answer compressed although the gateway asked for identity: refused',
        );
        attempt.reject(new UpstreamFailure('status'));
      } else
        attempt.resolve({
          kind: 'answer',
          answer: {
            status,
            headers: allowedAnswerHeaders(attempt.answerHeaders, retryAfterMaxSeconds),
            body: attempt.body(),
          },
        });
    },
    failed(attempt, error) {
      if (attempt.settled) return;
      fail(attempt, connectionFailed(attempt, error, attempt.timedOut, attempt.sent));
    },
  };

  /** A read answer outside the contract (offContract): the attempt fails with its error. */
  function offContractAnswer(attempt: Attempt, status: number): boolean {
    const error = offContract(attempt, status, attempt.answerHeaders, attempt.size > 0);
    if (error) attempt.reject(error);
    return error !== undefined;
  }

  /** A provider answer's head, read or piped: observed, kept for the ledger, told to the budget. */
  function answered(attempt: AttemptTiming, status: number, retryAfter: IncomingHttpHeaders['retry-after']) {
    const { call } = attempt;
    observeUpstream(attempt, status);
    call.lastStatus = status;
    call.answers++;
    call.lastAnswered = true;
    deps.budget?.observe(status, retryAfter);
  }

  /**
   * An attempt that got no answer, read or piped (timed out, or its connection failed): observed, logged when TLS or
   * the egress address is at fault. `sent`: it was handed to a connection (an attempt never sent is known as such: the
   * provider never saw it, its budget unit comes back).
   */
  function connectionFailed(
    attempt: AttemptTiming,
    error: Error,
    timedOut: boolean,
    sent: boolean,
  ): UpstreamFailure {
    observeUpstream(attempt, timedOut ? 'timeout' : 'error');
    if (timedOut) return new UpstreamFailure('timeout', undefined, !sent);
    const route = attempt.call.exchange.route;
    const tls = tlsFailureOf(error);
    if (tls) deps.logger.warn({ route, ...tls }, `upstream TLS failure: ${tls.cause}`);
    const unbound = bindFailureOf(error);
    if (unbound) deps.logger.error({ route, ...unbound.fields }, unbound.message);
    return new UpstreamFailure('connection', connectionCode(error), !sent);
  }

  const sendPiped =
    deps.streamAgent &&
    createPipedAttempts({
      baseUrl: deps.baseUrl,
      agent: deps.streamAgent,
      timeoutMs: deps.timeoutMs,
      retryAfterMaxSeconds,
      logger: deps.logger,
      answered,
      failed: connectionFailed,
      refusedAddress: ipRefused,
      offContract,
      injectTrace: (headers) => tracing.injectUpstream(headers),
    });

  /**
   * An answer outside every operation's contract (off-contract-answers.ts), read or streamed: a redirect, or a 4xx that
   * is not JSON. Logged; the call ends as no provider answer (nothing billed, a keyed request's claim released), but
   * for a 303 after a method that is not safe (the provider acted: billed as configured, a keyed 502 kept), with a 502
   * a closed circuit does not count (a half-open one's probe fails); a 429 is the provider's rate limit all the same:
   * UPSTREAM_RATE_LIMITED, Retry-After.
   */
  function offContract(
    attempt: AttemptTiming,
    status: number,
    headers: IncomingHttpHeaders,
    hasBody: boolean,
  ): Error | undefined {
    const redirect = isRedirect(status);
    if (!redirect && !isForeignRefusal(status, headers, hasBody)) return undefined;
    const { route, method } = attempt.call.exchange;
    const acted = actedAndRedirected(status, method);
    attempt.call.lastAnswered = acted;
    if (redirect) {
      deps.logger.warn(
        {
          route,
          ...redirectFields(status, headers.location, deps.baseUrl),
          ...(acted && { providerActed: true }),
        },
        REDIRECT_MESSAGE,
      );
      return new OffContractAnswer();
    }
    const contentType = String(headers['content-type'] ?? 'none').split(';')[0];
    deps.logger.warn({ route, status, contentType }, FOREIGN_REFUSAL_MESSAGE);
    if (status !== 429) return new OffContractAnswer();
    const retryAfter = allowedAnswerHeaders(headers, retryAfterMaxSeconds)['retry-after'] ?? '1';
    return new GatewayError('UPSTREAM_RATE_LIMITED', RATE_LIMITED_DETAIL, {
      headers: { 'retry-after': retryAfter },
    });
  }

  function observeUpstream(attempt: AttemptTiming, status: number | string) {
    const ms = performance.now() - attempt.startedAt;
    deps.metrics.upstreamDuration.observe(
      { route: attempt.call.exchange.route, status: String(status) },
      ms / 1000,
    );
    attempt.call.upstreamMs += ms;
  }

  /** One upstream call with `accessToken`; resolves with the answer or a 401 marker, rejects on failure. */
  function sendAttempt(call: Call, accessToken: string) {
    return new Promise<AttemptOutcome>((resolve, reject) => {
      const attempt = new Attempt(call, performance.now(), ends, resolve, reject);
      attempt.spentUnit = startAttempt(call);
      // The timeout runs from here, once a slot is held: connect and answer, not the wait in line (bounded apart).
      attempt.timer = setTimeout(() => {
        attempt.timedOut = true;
        observeUpstream(attempt, 'timeout');
        fail(attempt, new UpstreamFailure('timeout', undefined, !attempt.sent));
        attempt.controller?.abort(new UpstreamFailure('timeout'));
      }, call.exchange.timeoutMs ?? deps.timeoutMs);
      // The gateway's own token goes on the upstream request only; this attempt's span context (traces on).
      call.headers.authorization = `Bearer ${accessToken}`;
      tracing.injectUpstream(call.headers);
      // The upstream request is complete here, body included: nothing is streamed from the caller (the body was
      // validated and serialized once), so a caller who hangs up cannot leave the call half-sent. The call runs on
      // its own, not on the caller's response: a caller who hangs up neither aborts a call that coalesced readers
      // share nor counts as an upstream failure against the circuit breaker.
      deps.pool.dispatch(
        { path: call.path, method: call.exchange.method, headers: call.headers, body: call.exchange.body },
        attempt,
      );
    });
  }

  /** One upstream attempt, in a client span of its own. */
  function attemptOnce<C extends ExchangeCall>(call: C, accessToken: string, sender: AttemptSender<C>) {
    if (!tracing.enabled) return sender(call, accessToken);
    const send = () => sender(call, accessToken);
    return tracing.inSpan('upstream', send, outcomeAttributes, upstreamAttributes(call.exchange), 'client');
  }

  /**
   * The attempt under the circuit breaker, plus the single retry of an idempotent call on a connection error. A
   * promise chain, not an async frame: every call in flight keeps the frames it waits in alive (issue 40).
   */
  function guardedAttempt<C extends ExchangeCall>(
    req: Request,
    res: Response,
    call: C,
    accessToken: string,
    sender: AttemptSender<C>,
  ): Promise<AttemptOutcome> {
    const circuit = deps.circuits.of(call.exchange.route);
    const once = () => attemptOnce(call, accessToken, sender);
    return circuit.run(once).catch((error: unknown) => {
      const retryable =
        call.exchange.method === 'GET' &&
        error instanceof UpstreamFailure &&
        error.kind === 'connection' &&
        error.code !== undefined &&
        RETRYABLE_CONNECTION_ERRORS.has(error.code) &&
        !res.destroyed;
      if (!retryable) throw error;
      deps.logger.warn(
        { requestId: req.id, route: call.exchange.route, code: error.code },
        'upstream connection error, retrying once',
      );
      const admitting = admit(req, res, call);
      return admitting ? admitting.then(() => circuit.run(once)) : circuit.run(once);
    });
  }

  /**
   * One exchange, whichever way its answer travels: the budget, the token, an upstream slot (held until a piped
   * answer ended: its socket is busy until then), the attempt under its circuit, the single retry after a 401, the
   * ledger's fields. `attempt` is the guarded attempt with a token, run holding a slot. Settles with `result` of the
   * final answer (read or piped; no promise of its own in between), or rejects with the gateway's refusal.
   */
  async function runExchange<R>(
    req: Request,
    res: Response,
    call: ExchangeCall,
    attempt: (accessToken: string) => Promise<AttemptOutcome>,
    result: (outcome: AttemptOutcome) => R,
  ): Promise<R> {
    const exchange = call.exchange;
    try {
      const admitting = admit(req, res, call);
      if (admitting) await admitting;
      const token = await tracing.inSpan('token', getAccessToken, sourceAttribute);
      noteTokenSource(res, token.source);
      const first = await deps.slots.run(res, () => attempt(token.value));
      if (first.kind !== 'unauthorized') {
        deps.tokens.accepted?.();
        return result(first);
      }

      // 401: that token is dead (revoked, rotated key, expired early). Renew once and retry once, never loop. The
      // 401 is not the call's final answer: only the retry's is (a refusal before it leaves none).
      call.lastAnswered = false;
      const readmitting = admit(req, res, call);
      if (readmitting) await readmitting;
      const renewed = await tracing.inSpan(
        'token.renew',
        () => deps.tokens.renewAfterRejection(token.value),
        sourceAttribute,
      );
      noteTokenSource(res, renewed.source);
      const second = await deps.slots.run(res, () => attempt(renewed.value));
      if (second.kind !== 'unauthorized') {
        deps.tokens.accepted?.();
        return result(second);
      }
      throw new GatewayError('UPSTREAM_AUTH_FAILED', 'The upstream refused the gateway credentials.');
    } catch (error) {
      if (mayHaveReachedProvider(error)) res.locals.upstreamUnknown = true;
      throw toGatewayError(error, deps.circuits.of(exchange.route));
    } finally {
      giveBackUnsent(req, call);
      noteUpstreamFields(res.locals, call);
    }
  }

  return {
    forward(req, res, exchange) {
      // The upstream's own request, built from the exchange: the caller's method, URL and headers stay as they came
      // (the upstream sees the route's method, never a caller's HEAD, answered without a body that coalescing and
      // the cache would then hand to GETs).
      const call = new Call(exchange, basePath + exchange.path, upstreamHeaders(req, exchange));
      const attempt = (token: string) => guardedAttempt(req, res, call, token, sendAttempt);
      return runExchange(req, res, call, attempt, answerOf);
    },
    stream(req, res, exchange, beforeHead) {
      if (!sendPiped)
        return Promise.reject(new Error('this forwarder has no agent for piped answers (streamAgent)'));
      const headers = upstreamHeaders(req, exchange);
      // Whatever the provider sends: a statement, a PDF (the read answers ask for JSON).
      headers.accept = '*/*';
      const call = new PipedCall(exchange, headers, res, beforeHead);
      const attempt = (token: string) => guardedAttempt(req, res, call, token, sendPiped).then(untilPipeEnds);
      return runExchange(req, res, call, attempt, nothing);
    },
  };

  /** The complete upstream header set of one exchange (header-policy.ts), never the caller's. */
  function upstreamHeaders(req: Request, exchange: UpstreamExchange): Record<string, string> {
    const headers = upstreamRequestHeaders({
      requestId: req.id,
      staticHeaders: deps.staticHeaders,
      contentLength: exchange.body?.length,
    });
    if (exchange.idempotencyKey !== undefined) headers['idempotency-key'] = exchange.idempotencyKey;
    return headers;
  }

  /**
   * Room in the provider budget for one call of the caller's priority: synchronous and allocation-free when granted
   * (the common case); a wait only when the budget says so. Refused: the reason with Retry-After, never sent.
   */
  function admit(req: Request, res: Response, call: ExchangeCall): Promise<void> | undefined {
    if (!deps.budget) return undefined;
    const priority = req.caller?.priority ?? 'standard';
    const admission = deps.budget.admit(priority);
    if (!(admission instanceof Promise)) {
      if (!admission.granted) return settleAdmission(admission, res, priority);
      call.budgetHeld += 1;
      return undefined;
    }
    return settleAdmission(admission, res, priority).then(() => {
      call.budgetHeld += 1;
    });
  }

  /**
   * Units granted for attempts that were never sent (the token could not be had, the upstream slots or the circuit
   * refused, the caller left): back to the budget, which may grant them to another call.
   */
  function giveBackUnsent(req: Request, call: ExchangeCall) {
    for (; call.budgetHeld > 0; call.budgetHeld -= 1)
      deps.budget?.giveBack?.(req.caller?.priority ?? 'standard');
  }

  /** For the request log; the token manager counts the sources in metrics. */
  function noteTokenSource(res: Response, source: TokenSource) {
    res.locals.tokenSource = source;
  }
}

/** Span attributes of an upstream attempt: the operation, never its path (it holds the plan id). */
function upstreamAttributes(exchange: UpstreamExchange) {
  return { 'http.request.method': exchange.method, 'gateway.route': exchange.route };
}

function outcomeAttributes(outcome: AttemptOutcome) {
  const status =
    outcome.kind === 'answer' ? outcome.answer.status : outcome.kind === 'piped' ? outcome.status : 401;
  return { 'http.response.status_code': status };
}

/** The read answer of a buffered call's outcome (runExchange only returns answers, never the 401 marker). */
function answerOf(outcome: AttemptOutcome): UpstreamAnswer {
  return (outcome as { readonly answer: UpstreamAnswer }).answer;
}

/** A piped call's result: the answer went to the caller. */
function nothing(): void {}

/** A piped answer holds its upstream slot until the pipe ended (its socket is busy until then). */
function untilPipeEnds(outcome: AttemptOutcome): AttemptOutcome | Promise<AttemptOutcome> {
  return outcome.kind === 'piped' ? outcome.done.then(() => outcome) : outcome;
}

/** Where the token came from: this replica's memory, the shared store (Redis), or a token endpoint call. */
function sourceAttribute(token: { readonly source: TokenSource }) {
  return { 'gateway.token.source': token.source };
}

/** A budget that had to wait: granted after all, or refused (noted for the request log). */
async function settleAdmission(
  pending: BudgetAdmission | (Promise<BudgetAdmission> & { cancel?(): void }),
  res: Response,
  priority: string,
): Promise<void> {
  let admission: BudgetAdmission;
  if (pending instanceof Promise && pending.cancel) {
    // The caller hangs up while waiting: the wait ends, nothing is taken from the budget.
    const cancel = pending.cancel;
    res.once('close', cancel);
    try {
      admission = await pending;
    } finally {
      res.off('close', cancel);
    }
  } else admission = await pending;
  if (admission.granted) return;
  res.locals.budget = admission.reason === 'UPSTREAM_BUDGET_EXHAUSTED' ? 'exhausted' : 'rate_limited';
  res.locals.priority = priority;
  throw new GatewayError(
    admission.reason,
    admission.reason === 'UPSTREAM_BUDGET_EXHAUSTED'
      ? "The provider account's call budget has no room for this call now; retry after the Retry-After seconds."
      : RATE_LIMITED_DETAIL,
    { headers: { 'retry-after': String(admission.retryAfterSeconds) } },
  );
}

function ipRefused(): GatewayError {
  return new GatewayError(
    'UPSTREAM_IP_NOT_WHITELISTED',
    "The upstream refused this gateway's IP address: whitelist the gateway's egress IP with the provider.",
  );
}

function toGatewayError(error: unknown, circuit: UpstreamCircuit): unknown {
  if (error instanceof GatewayError) return error;
  if (error instanceof CircuitOpenError) {
    return new GatewayError(
      'UPSTREAM_UNAVAILABLE',
      'The upstream is failing; the gateway stopped calling it for now.',
      {
        status: 503,
        headers: { 'retry-after': String(circuit.retryAfterSeconds) },
      },
    );
  }
  if (error instanceof UpstreamFailure && error.kind === 'timeout') {
    return new GatewayError('UPSTREAM_TIMEOUT', 'The upstream did not answer in time.');
  }
  if (error instanceof UpstreamFailure) {
    return new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream could not be reached or failed.');
  }
  return error;
}

/** Writes a buffered upstream answer to the caller (allow-listed headers only). */
export function sendAnswer(res: Response, answer: UpstreamAnswer): void {
  res.status(answer.status);
  // The allow-list again, not the answer's own names: a cached answer (an older version's, or a forged Redis
  // record) cannot add a header the policy drops.
  for (const name of ANSWER_HEADERS) {
    const value = answer.headers[name];
    if (value !== undefined) res.setHeader(name, value);
  }
  res.setHeader('content-length', answer.body.length);
  res.end(answer.body);
}
