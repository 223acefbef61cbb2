// Requests Node's HTTP parser refuses before any middleware runs (bad syntax, headers too large, a request that did not
// arrive in time, an Expect the server does not meet): answered in the error envelope with an X-Request-Id, the
// security headers and no-store like every other gateway-made error, instead of Node's bare status line.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { type FixedHeader, fixedAnswerHeaders } from './answer-head';
import { markClosing } from './closing-connection';
import { GatewayError } from './gateway-error';
import { requestIdOf } from './request-id';

/** The reasons of the refusals (/openapi.json lists them under every operation). */
export type ProtocolReason =
  | 'INVALID_REQUEST'
  | 'REQUEST_HEADERS_TOO_LARGE'
  | 'PAYLOAD_TOO_LARGE'
  | 'REQUEST_TIMEOUT'
  | 'EXPECTATION_FAILED';

export interface ProtocolRefusal {
  readonly status: number;
  readonly statusText: string;
  readonly reason: ProtocolReason;
  readonly detail: string;
}

const MALFORMED: ProtocolRefusal = {
  status: 400,
  statusText: 'Bad Request',
  reason: 'INVALID_REQUEST',
  detail: 'The request is not well-formed HTTP/1.1.',
};

/** Node's error codes, as its own clientError answer maps them (status), with the gateway's reasons. */
const BY_CODE: Readonly<Record<string, ProtocolRefusal>> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    statusText: 'Request Header Fields Too Large',
    reason: 'REQUEST_HEADERS_TOO_LARGE',
    detail: 'The request headers are too large.',
  },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: {
    status: 413,
    statusText: 'Payload Too Large',
    reason: 'PAYLOAD_TOO_LARGE',
    detail: 'The chunk extensions of the request body are too large.',
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    statusText: 'Request Timeout',
    reason: 'REQUEST_TIMEOUT',
    detail: 'The request did not arrive in time.',
  },
};

const EXPECTATION_FAILED: ProtocolRefusal = {
  status: 417,
  statusText: 'Expectation Failed',
  reason: 'EXPECTATION_FAILED',
  detail: 'Only "Expect: 100-continue" is supported.',
};

/** The envelope of SPEC §3 (no `errors` list: no field of the request was read). */
function envelope(refusal: ProtocolRefusal, requestId: string): string {
  return JSON.stringify({
    status: { code: String(refusal.status), description: refusal.reason, detail: refusal.detail },
    requestId,
  });
}

/** Every refusal a request can get before any route runs, whatever its path and method (for /openapi.json). */
export const PROTOCOL_REFUSALS: readonly ProtocolRefusal[] = [
  MALFORMED,
  ...Object.values(BY_CODE),
  EXPECTATION_FAILED,
];

function answerHeaders(body: string, requestId: string, fixed: readonly FixedHeader[]): [string, string][] {
  return [
    ['content-type', 'application/json; charset=utf-8'],
    ['content-length', String(Buffer.byteLength(body))],
    ['x-request-id', requestId],
    // What every answer carries (security headers, no-store, X-Upstream in local mode), as on the app's answers.
    ...fixed.map(([name, value]): [string, string] => [name, value]),
    ['connection', 'close'],
  ];
}

/** The refusal for one of Node's client errors (by its code; anything else is malformed HTTP). */
function refusalOf(error: { code?: string }): ProtocolRefusal {
  const code = error.code;
  return code !== undefined && Object.hasOwn(BY_CODE, code) ? (BY_CODE[code] as ProtocolRefusal) : MALFORMED;
}

/**
 * The raw answer for a socket whose request Node could not parse (no response object exists). A HEAD request's answer
 * has the head alone (RFC 9110: never a body), with the length the body would have.
 */
function protocolErrorAnswer(
  refusal: ProtocolRefusal,
  requestId: string,
  fixed: readonly FixedHeader[],
  head: boolean,
): string {
  const body = envelope(refusal, requestId);
  const lines = answerHeaders(body, requestId, fixed)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `HTTP/1.1 ${refusal.status} ${refusal.statusText}\r\n${lines}\r\n${head ? '' : body}`;
}

/** A whole HEAD request line at the start of a chunk. */
const HEAD_REQUEST_LINE = /^HEAD [^\s]+ HTTP\/1\.[01]\r?\n/;

/**
 * Whether the refused request is a HEAD: the one in flight, or the chunk Node could not parse when it starts with a
 * whole HEAD request line. Node keeps only the last chunk it read: a HEAD whose line came in an earlier chunk (or
 * whose headers never ended) still gets the body, which does no harm on a connection that closes after it.
 */
function isHead(error: { rawPacket?: unknown }, inFlight: ServerResponse | null | undefined): boolean {
  if (inFlight) return inFlight.req.method === 'HEAD';
  const raw = error.rawPacket;
  return Buffer.isBuffer(raw) && HEAD_REQUEST_LINE.test(raw.subarray(0, 8_192).toString('latin1'));
}

/**
 * A request whose head the gateway refuses before any other work: more than {@link MAX_HEADER_FIELDS} header fields
 * (431 REQUEST_HEADERS_TOO_LARGE), or a Host a server must refuse ({@link hostRefusal}). Both close the connection.
 */
export function headRefusal(req: IncomingMessage): GatewayError | undefined {
  if (req.rawHeaders.length > 2 * MAX_HEADER_FIELDS)
    return new GatewayError(
      'REQUEST_HEADERS_TOO_LARGE',
      `A request may carry at most ${MAX_HEADER_FIELDS} header fields.`,
      { headers: { connection: 'close' } },
    );
  return hostRefusal(req);
}

/**
 * The most header fields a request may carry. Node reads one more (the server's `maxHeadersCount`) and drops the rest
 * silently: a request over the limit is refused rather than served without its later headers (its Host, its API key,
 * its Idempotency-Key).
 */
export const MAX_HEADER_FIELDS = 100;

/**
 * A request whose Host a server must refuse (RFC 9112, 3.2: 400 to a request without Host in HTTP/1.1, with more than
 * one Host, or with an invalid one). Node answers a missing Host itself with a bare 400 and no X-Request-Id unless
 * `requireHostHeader` is off, and keeps the first of several; the gateway's server turns the check off, and its first
 * middleware answers with this error in the envelope instead. HTTP/1.0 needs no Host.
 */
function hostRefusal(req: IncomingMessage): GatewayError | undefined {
  const host = req.headers.host;
  if (host === undefined) {
    if (req.httpVersionMajor !== 1 || req.httpVersionMinor !== 1) return undefined;
    return refusedHost('An HTTP/1.1 request must carry a Host header.');
  }
  if (!HOST_VALUE.test(host))
    return refusedHost('The Host header must be a host name or address, with an optional port.');
  if (hostHeaders(req.rawHeaders) > 1)
    return refusedHost('A request must carry one Host header, not several.');
  return undefined;
}

/** uri-host [":" port] (RFC 3986): a bracketed IPv6 literal, or a reg-name / IPv4 address; empty is allowed. */
const HOST_VALUE = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]*)(?::[0-9]{0,5})?$/;

/** How many Host headers the request carried (Node keeps the first one in `headers`). */
function hostHeaders(raw: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 4 && name.toLowerCase() === 'host') count++;
  }
  return count;
}

function refusedHost(detail: string): GatewayError {
  return new GatewayError('INVALID_REQUEST', detail, { headers: { connection: 'close' } });
}

/** Node's server socket: the answer being written, and the parser with the request it is reading (or null). */
type HttpSocket = Socket & {
  _httpMessage?: ServerResponse | null;
  parser?: { incoming?: IncomingMessage | null } | null;
};

/**
 * Whether the request being read was answered already: its answer is finished (none is in flight) while its body is
 * still coming in (an early refusal, a 401 or a 403, does not wait for it). Its caller has its answer.
 */
function answeredWhileReading(socket: HttpSocket): boolean {
  return socket.parser?.incoming?.complete === false;
}

/**
 * Installs the answers on `server`, each with one log line (its request id, the caller's address, status and reason;
 * never the bytes received). When an earlier request, read whole, is still being answered (pipelining), its answer,
 * possibly the provider's, is the caller's to read: the connection closes after it and the unreadable request behind
 * it is never answered (Node's own handler writes its 400 there, which a caller reads as the answer to the earlier
 * request). A request whose own body did not come in time is answered 408 unless its answer has begun or ended. A
 * connection reset needs no answer.
 */
export function answerProtocolErrors(
  server: Server,
  logger: Pick<Logger, 'info'>,
  options: { readonly localMode: boolean },
): void {
  const fixed = fixedAnswerHeaders(options);
  // Node's parser keeps its error: every later chunk on the connection (and its end) raises it again. One refusal each.
  const refused = new WeakSet<Socket>();
  server.on('clientError', (error: Error & { code?: string; rawPacket?: unknown }, socket: HttpSocket) => {
    if (refused.has(socket)) return;
    refused.add(socket);
    const refusal = refusalOf(error);
    const clientIp = socket.remoteAddress;
    const inFlight = socket._httpMessage;
    if (error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    // An earlier request, read whole, still being answered: the error is about a request behind it.
    if (inFlight?.req.complete) {
      // Nothing more is read from the caller; the answer owed is still written.
      socket.pause();
      if (!inFlight.headersSent) inFlight.shouldKeepAlive = false;
      inFlight.once('finish', () => socket.destroySoon());
      inFlight.once('close', () => {
        if (!inFlight.writableFinished) socket.destroy();
      });
      logger.info(
        { clientIp, status: refusal.status, reason: refusal.reason },
        'unreadable request behind one still being answered: the connection closes after that answer',
      );
      return;
    }
    // Else the error is about the request being read (its body did not come in time): answered, as Node does, unless
    // its answer has begun, or is finished already (a 408 behind it would be read as the answer to the next request).
    if (!socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    if (!inFlight && answeredWhileReading(socket)) {
      socket.destroy();
      logger.info(
        { clientIp, status: refusal.status, reason: refusal.reason },
        'the body of a request already answered did not come in time: the connection closes, no answer behind it',
      );
      return;
    }
    // The request in flight keeps the id it was given (the caller's, when well-formed).
    const requestId = String(inFlight?.getHeader('x-request-id') ?? randomUUID());
    socket.write(protocolErrorAnswer(refusal, requestId, fixed, isHead(error, inFlight)));
    socket.destroy();
    logger.info(
      { requestId, clientIp, status: refusal.status, reason: refusal.reason },
      'request refused by the HTTP parser',
    );
  });
  // Node answers a bare 417 to an Expect other than 100-continue; listening takes that over. The request was read:
  // the caller's well-formed X-Request-Id is kept, as on every other answer.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const requestId = requestIdOf(req.headers['x-request-id']);
    const body = envelope(EXPECTATION_FAILED, requestId);
    res.shouldKeepAlive = false;
    markClosing(req.socket);
    res.writeHead(EXPECTATION_FAILED.status, answerHeaders(body, requestId, fixed).flat());
    res.end(body);
    logger.info(
      {
        requestId,
        clientIp: req.socket.remoteAddress,
        status: EXPECTATION_FAILED.status,
        reason: EXPECTATION_FAILED.reason,
      },
      'request refused: unsupported Expect',
    );
  });
}
