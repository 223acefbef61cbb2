// Requests Node's HTTP parser refuses before any middleware runs (bad syntax, headers too large, a request that did not
// arrive in time, an Expect the server does not meet): answered in the error envelope with an X-Request-Id, the
// security headers and no-store like every other gateway-made error, instead of Node's bare status line.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { SECURITY_HEADERS } from './security-headers';

interface ProtocolRefusal {
  readonly status: number;
  readonly statusText: string;
  readonly reason: string;
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

/** The envelope of SPEC §3, with a request id of its own (the request's headers were never read). */
function envelope(refusal: ProtocolRefusal, requestId: string): string {
  return JSON.stringify({
    status: { code: String(refusal.status), description: refusal.reason, detail: refusal.detail },
    requestId,
  });
}

function answerHeaders(body: string, requestId: string): [string, string][] {
  return [
    ['content-type', 'application/json; charset=utf-8'],
    ['content-length', String(Buffer.byteLength(body))],
    ['cache-control', 'no-store'],
    ['x-request-id', requestId],
    ...SECURITY_HEADERS.map(([name, value]): [string, string] => [name, value]),
    ['connection', 'close'],
  ];
}

/** The raw answer for a socket whose request Node could not parse (no response object exists). */
export function protocolErrorAnswer(error: { code?: string }): string {
  const refusal = (error.code !== undefined && BY_CODE[error.code]) || MALFORMED;
  const requestId = randomUUID();
  const body = envelope(refusal, requestId);
  const head = answerHeaders(body, requestId)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `HTTP/1.1 ${refusal.status} ${refusal.statusText}\r\n${head}\r\n${body}`;
}

/**
 * Installs the answers on `server`. As Node's own handler does: an answer only when the socket can still take one and
 * no answer of an earlier request on it has begun (else the caller would read a corrupted stream), then the
 * connection is destroyed. A connection reset needs no answer.
 */
export function answerProtocolErrors(server: Server): void {
  server.on('clientError', (error: Error & { code?: string }, socket: Duplex) => {
    const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
    if (error.code !== 'ECONNRESET' && socket.writable && !inFlight?.headersSent)
      socket.write(protocolErrorAnswer(error));
    socket.destroy();
  });
  // Node answers a bare 417 to an Expect other than 100-continue; listening takes that over.
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const requestId = randomUUID();
    const body = envelope(EXPECTATION_FAILED, requestId);
    res.shouldKeepAlive = false;
    res.writeHead(EXPECTATION_FAILED.status, answerHeaders(body, requestId).flat());
    res.end(body);
  });
}
