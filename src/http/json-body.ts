// Reads a JSON body: application/json only (415), bounded size (413), strict JSON (400).
import type { IncomingHttpHeaders } from 'node:http';
import express, { type Request, type RequestHandler } from 'express';
import { GatewayError } from './gateway-error';

/**
 * One middleware. The common request (`Content-Type: application/json`, optionally `; charset=utf-8`, a
 * Content-Length, no Content-Encoding) is read straight from the stream, or refused 413 at once when its length is over
 * the limit; anything else goes through body-parser, which knows every other case (chunked bodies, gzip/deflate/br,
 * other charsets). Both paths give the same answers (test/unit/http/json-body.test.ts compares them). The direct read skips what
 * body-parser adds around the read (type-is, raw-body's stream helpers and deferred callback, iconv-lite), which
 * shows in the CPU per POST (bench/README.md).
 */
export function jsonBody(limitBytes: number): RequestHandler {
  const bodyParser = express.json({ limit: limitBytes, strict: true, type: () => true });
  return (req, res, next) => {
    const length = plainJsonLength(req.headers);
    if (length !== undefined) {
      // Over the limit: refused at once (body-parser answers only once the whole body is read off, or at the request
      // timeout when it stalls). The connection stays open: Node reads the rest of the body off after the answer,
      // so a client still sending it is never cut mid-upload, and a request pipelined behind it is served as usual.
      if (length > limitBytes) next(bodyError('entity.too.large'));
      else readPlainJson(req, length, next);
      return;
    }
    if (!req.is('application/json')) {
      next(new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'The request body must be application/json.'));
      return;
    }
    bodyParser(req, res, next);
  };
}

/** The declared length of a plain UTF-8 JSON body, or undefined for any other request. */
function plainJsonLength(headers: IncomingHttpHeaders): number | undefined {
  const type = headers['content-type'];
  if (type !== 'application/json' && type?.toLowerCase() !== 'application/json; charset=utf-8')
    return undefined;
  if (headers['content-encoding'] !== undefined || headers['transfer-encoding'] !== undefined)
    return undefined;
  const declared = headers['content-length'];
  if (declared === undefined || !/^\d{1,15}$/.test(declared)) return undefined;
  return Number(declared);
}

/** The errors body-parser raises, by its `type`, so the error envelope maps both paths the same way. */
function bodyError(type: 'entity.parse.failed' | 'request.aborted' | 'entity.too.large'): Error {
  const status = type === 'entity.too.large' ? 413 : 400;
  return Object.assign(new Error(type), { type, status, expose: true });
}

function readPlainJson(req: Request, length: number, next: (error?: unknown) => void): void {
  // The caller may have hung up while earlier middleware waited (the rate limiter): no event would come now.
  if (req.destroyed) {
    next(bodyError('request.aborted'));
    return;
  }
  // Node's parser delivers exactly Content-Length bytes before 'end'; an earlier 'close' or 'error' is an abort.
  const chunks: Buffer[] = [];
  const onData = (chunk: Buffer) => chunks.push(chunk);
  const onEnd = () => {
    stop();
    try {
      req.body = parseStrictJson(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, length));
    } catch {
      next(bodyError('entity.parse.failed'));
      return;
    }
    next();
  };
  const onAbort = () => {
    stop();
    next(bodyError('request.aborted'));
  };
  const stop = () => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onAbort);
    req.off('close', onAbort);
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onAbort);
  req.on('close', onAbort);
}

/** JSON whitespace (RFC 8259): space, tab, line feed, carriage return. */
const FIRST_NON_SPACE = /^[ \t\n\r]*(.)/s;

/** body-parser's strict JSON: an empty body is `{}`, a leading BOM is dropped, only an object or array is JSON. */
function parseStrictJson(bytes: Buffer): unknown {
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.length === 0) return {};
  const first = text[0] === '{' || text[0] === '[' ? text[0] : FIRST_NON_SPACE.exec(text)?.[1];
  if (first !== '{' && first !== '[') throw new SyntaxError('not a JSON object or array');
  return JSON.parse(text);
}
