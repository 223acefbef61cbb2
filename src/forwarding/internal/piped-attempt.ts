// The attempts of `answer: "stream"` operations: http-proxy-middleware over the account's http(s) Agent pipes the
// provider's answer to the caller as it arrives, never buffered and never capped (a statement export, a PDF). Only
// the attempt is here: the flow around it (budget, token, upstream slots, circuit, the 401 retry, the ledger's
// fields) is the forwarder's, the same as for the answers it reads over its undici pool.
import type { Agent, ClientRequest, IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { Logger } from 'pino';
import { UpstreamFailure } from './circuit-breaker';
import {
  type AttemptOutcome,
  type AttemptSender,
  type AttemptTiming,
  type ExchangeCall,
  keepUnsentUnit,
  noteUpstreamFields,
  startAttempt,
  type UpstreamExchange,
} from './exchange-call';
import { allowedAnswerHeaders } from './header-policy';
import { announcesBody } from './off-contract-answers';
import {
  DETACHED_RESPONSE,
  takingUpstreamRequests,
  UPSTREAM_PROXY_OPTIONS,
  UpstreamRequest,
} from './upstream-request';

/** What the piped attempts use of the forwarder: its settings, and its bookkeeping shared with the read answers. */
export interface PipedAttemptDeps {
  readonly baseUrl: string;
  /** The account's http(s) Agent for piped answers (upstream-agent.ts: CA, localAddress, keep-alive). */
  readonly agent: Agent;
  /** The account's timeout, when the operation has none: it runs until the answer's head arrives. */
  readonly timeoutMs: number;
  readonly retryAfterMaxSeconds: number;
  readonly logger: Logger;
  /** A provider answer's head arrived: metrics, the call's ledger fields, the budget told. */
  answered(attempt: AttemptTiming, status: number, retryAfter: IncomingHttpHeaders['retry-after']): void;
  /**
   * The attempt ended without an answer (timed out, or its connection failed): observed and logged; its failure.
   * `sent`: the request was handed to a socket (never sent: the provider never saw it).
   */
  failed(attempt: AttemptTiming, error: Error, timedOut: boolean, sent: boolean): UpstreamFailure;
  /** The provider refused the gateway's address (403). */
  refusedAddress(): Error;
  /** An answer outside the contract (a 3xx, a 4xx that is not JSON: off-contract-answers.ts), its error; never piped. */
  offContract(
    attempt: AttemptTiming,
    status: number,
    headers: IncomingHttpHeaders,
    hasBody: boolean,
  ): Error | undefined;
  /** This attempt's trace context on the upstream headers (traces on). */
  injectTrace(headers: Record<string, string>): void;
}

/**
 * One piped exchange over its attempts, and the request http-proxy-middleware is handed for each (its events hand it
 * back): the caller's own request is never handed over.
 */
export class PipedCall extends UpstreamRequest implements ExchangeCall {
  upstreamMs = 0;
  lastStatus = 0;
  answers = 0;
  lastAnswered = false;
  budgetHeld = 0;
  /** The attempt running now (undefined between attempts and once its head arrived). */
  running: PipedAttempt | undefined = undefined;

  constructor(
    readonly exchange: UpstreamExchange,
    headers: Record<string, string>,
    /** The caller's response: the answer is piped to it. */
    readonly res: Response,
    /** Told once the final answer's head is in and the ledger's fields are set, before anything is written. */
    readonly beforeHead: (() => void) | undefined,
  ) {
    super(exchange, headers);
  }
}

class PipedAttempt implements AttemptTiming<PipedCall> {
  timer: NodeJS.Timeout | undefined = undefined;
  /** Known once the agent gives the request a socket (it may first connect). */
  proxyReq: ClientRequest | undefined = undefined;
  timedOut = false;
  settled = false;
  /** This attempt took one of the call's budget units (given back if it is never sent). */
  spentUnit = false;

  constructor(
    readonly call: PipedCall,
    readonly startedAt: number,
    readonly resolve: (outcome: AttemptOutcome) => void,
    readonly reject: (error: unknown) => void,
  ) {}
}

const UNAUTHORIZED: AttemptOutcome = { kind: 'unauthorized' };

/** The request hpm's events hand back is always a PipedCall (nothing else is sent): checked rather than cast. */
function runningAttempt(req: unknown): PipedAttempt | undefined {
  return req instanceof PipedCall ? req.running : undefined;
}

/** The sender of piped attempts for one account (one http-proxy-middleware instance, made once). */
export function createPipedAttempts(deps: PipedAttemptDeps): AttemptSender<PipedCall> {
  /** A failed upstream call: httpxy reports a reset as 'econnreset' (the request has no socket), others as 'error'. */
  const upstreamError = (error: Error, req?: IncomingMessage) => {
    const attempt = runningAttempt(req);
    if (!attempt || attempt.settled) return;
    fail(attempt, deps.failed(attempt, error, attempt.timedOut, attempt.proxyReq !== undefined));
  };

  const proxy = takingUpstreamRequests(
    createProxyMiddleware<IncomingMessage, ServerResponse>({
      // A URL, parsed once: given a string, http-proxy-middleware and httpxy would each parse it on every request.
      target: new URL(deps.baseUrl),
      agent: deps.agent,
      ...UPSTREAM_PROXY_OPTIONS,
      plugins: [
        (server) => {
          server.on('proxyReq', (proxyReq: ClientRequest, req: IncomingMessage) => {
            const attempt = runningAttempt(req);
            if (!attempt || attempt.settled) {
              // Settled (timed out) while connecting: never send it.
              proxyReq.destroy();
              return;
            }
            attempt.proxyReq = proxyReq;
            // Complete here, body included: the body was validated and serialized once, nothing comes from the caller.
            proxyReq.end(attempt.call.exchange.body);
          });
          server.on('proxyRes', (proxyRes: IncomingMessage, req: IncomingMessage) => {
            const attempt = runningAttempt(req);
            if (!attempt || attempt.settled) proxyRes.destroy();
            else headArrived(deps, attempt, proxyRes);
          });
          server.on('error', upstreamError);
          server.on('econnreset', upstreamError);
        },
      ],
    }),
  );

  return (call, accessToken) =>
    new Promise<AttemptOutcome>((resolve, reject) => {
      const attempt = new PipedAttempt(call, performance.now(), resolve, reject);
      call.running = attempt;
      attempt.spentUnit = startAttempt(call);
      // Until the answer's head: connect, send, the provider's first byte. The wait in line is bounded apart.
      attempt.timer = setTimeout(() => {
        attempt.timedOut = true;
        const sent = attempt.proxyReq !== undefined;
        attempt.proxyReq?.destroy();
        fail(attempt, deps.failed(attempt, new Error('upstream timeout'), true, sent));
      }, call.exchange.timeoutMs ?? deps.timeoutMs);
      call.headers.authorization = `Bearer ${accessToken}`;
      deps.injectTrace(call.headers);
      // On a stand-in response, not the caller's: the answer is the forwarder's to pipe (after the 401 check).
      proxy(call, DETACHED_RESPONSE).catch((error: unknown) => fail(attempt, error));
    });
}

/**
 * The answer's head: the timeout ends here (a large answer may take long to arrive). A 401, 403, 5xx or an answer
 * outside the contract (a 3xx, a 4xx that is not JSON) is drained and never reaches the caller (the flow retries, or
 * answers with the gateway's envelope); anything else is piped.
 */
function headArrived(deps: PipedAttemptDeps, attempt: PipedAttempt, proxyRes: IncomingMessage) {
  settle(attempt);
  const status = proxyRes.statusCode ?? 0;
  deps.answered(attempt, status, proxyRes.headers['retry-after']);
  if (status === 401) {
    dropped(proxyRes);
    attempt.resolve(UNAUTHORIZED);
  } else if (status === 403) {
    dropped(proxyRes);
    attempt.reject(deps.refusedAddress());
  } else if (status >= 500) {
    dropped(proxyRes);
    attempt.reject(new UpstreamFailure('status'));
  } else {
    const refused = deps.offContract(attempt, status, proxyRes.headers, announcesBody(proxyRes.headers));
    if (refused) {
      dropped(proxyRes);
      attempt.reject(refused);
    } else attempt.resolve({ kind: 'piped', status, done: pipeAnswer(deps, attempt.call, proxyRes, status) });
  }
}

/** Pipes the answer to the caller: the allow-listed headers, then the body as it arrives. */
function pipeAnswer(
  deps: PipedAttemptDeps,
  call: PipedCall,
  proxyRes: IncomingMessage,
  status: number,
): Promise<void> {
  const { res } = call;
  // The ledger reads these when the caller's answer closes, which may come before the flow resumes: set first.
  noteUpstreamFields(res.locals, call);
  call.beforeHead?.();
  if (res.destroyed) {
    // The caller hung up while the call was out: nobody reads the answer.
    proxyRes.destroy();
    return Promise.resolve();
  }
  res.status(status);
  const headers = allowedAnswerHeaders(proxyRes.headers, deps.retryAfterMaxSeconds);
  for (const name in headers) res.setHeader(name, headers[name] as string);
  // Framing, not content: the caller can tell a cut answer from a complete one.
  const length = proxyRes.headers['content-length'];
  if (length !== undefined) res.setHeader('content-length', length);
  // The body passes as the provider encoded it (a gzip export): without its encoding the caller cannot read it.
  const encoding = proxyRes.headers['content-encoding'];
  if (encoding !== undefined) res.setHeader('content-encoding', encoding);
  if (res.req.method === 'HEAD') {
    // Express answers HEAD from the GET route: the head only, the provider's body is not read.
    proxyRes.destroy();
    res.end();
    return Promise.resolve();
  }
  return new Promise<void>((done) => {
    // A provider that stops sending mid-answer for the operation's timeout: the answer is cut (the caller's too),
    // so a stalled provider never holds the upstream slot for as long as the caller waits.
    // The same bound holds a caller who reads nothing for as long (the pipe paused the provider for it): the slot is
    // not held for a caller who declines to read, and the log names the side that stalled.
    let cutHere = false;
    const stalled = setTimeout(() => {
      const callerBehind = res.writableNeedDrain;
      deps.logger.warn(
        { route: call.exchange.route },
        callerBehind ? 'caller not reading while streaming' : 'upstream answer stalled while streaming',
      );
      cutHere = true;
      proxyRes.destroy();
    }, call.exchange.timeoutMs ?? deps.timeoutMs);
    proxyRes.on('data', () => stalled.refresh());
    res.once('close', () => {
      clearTimeout(stalled);
      // The caller hung up mid-answer: the upstream response ends with it (its socket closed, nothing leaks). The
      // provider did answer: it counts as the caller's, never against the circuit.
      if (!proxyRes.complete) proxyRes.destroy();
      done();
    });
    proxyRes.once('close', () => {
      if (proxyRes.complete || res.destroyed) return;
      // The provider cut its answer: too late for an envelope, the caller's answer is cut too (never ends as whole).
      if (!cutHere) deps.logger.warn({ route: call.exchange.route }, 'upstream answer cut while streaming');
      res.destroy();
    });
    proxyRes.pipe(res);
  });
}

function settle(attempt: PipedAttempt): void {
  attempt.settled = true;
  clearTimeout(attempt.timer);
  if (attempt.call.running === attempt) attempt.call.running = undefined;
}

function fail(attempt: PipedAttempt, error: unknown): void {
  if (attempt.settled) return;
  settle(attempt);
  keepUnsentUnit(attempt.call, attempt.spentUnit, error);
  attempt.reject(error);
}

/**
 * An answer that is not passed on (401, 403, 5xx): its connection is closed rather than its body read, so a provider
 * that sends the head and then nothing cannot hold the call (and its upstream slot) past the answer's head.
 */
function dropped(proxyRes: IncomingMessage): void {
  proxyRes.destroy();
}
