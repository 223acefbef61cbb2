// Header allow-lists in both directions: what may travel to the upstream, and what may come back to a caller.
import type { IncomingHttpHeaders } from 'node:http';
import { readRetryAfter } from '../../http/retry-after';

/**
 * Upstream answer headers a client needs; everything else (Set-Cookie, Server, X-Powered-By, ...) is dropped. No
 * caching header (Cache-Control, Expires, ETag, Last-Modified, Age, Vary, Pragma) passes: every gateway answer is
 * `Cache-Control: no-store` (see http/answer-head.ts), whatever the upstream says. Content-Disposition: the file name
 * of an export (a statement's CSV, a PDF) the caller saves.
 */
export const ANSWER_HEADERS: readonly string[] = [
  'content-type',
  'content-language',
  'content-disposition',
  'retry-after',
];

export interface UpstreamRequestHeaderInput {
  readonly requestId: string;
  readonly staticHeaders: Readonly<Record<string, string>>;
  /** Set for requests with a body (the sanitized JSON the gateway re-serialized). */
  readonly contentLength?: number;
}

/**
 * The header set toward the upstream (the forwarder adds the gateway's own `Authorization` on the outgoing
 * request). Built from scratch rather than filtered, so the caller's Authorization, X-API-Key, cookies and
 * X-Forwarded-* can never slip through.
 */
export function upstreamRequestHeaders(input: UpstreamRequestHeaderInput): Record<string, string> {
  const headers: Record<string, string> = {
    ...input.staticHeaders,
    accept: 'application/json',
    // The gateway reads the answers it fetches (filters, caches, replays them): never compressed.
    'accept-encoding': 'identity',
    'x-request-id': input.requestId,
  };
  if (input.contentLength !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(input.contentLength);
  }
  return headers;
}

/**
 * The allow-listed answer headers. A provider's Retry-After reaches the caller as whole seconds, at most
 * `retryAfterMaxSeconds` (UPSTREAM_RETRY_AFTER_MAX_SECONDS, the cap the budget's pause keeps to): an HTTP date
 * becomes the seconds left, a negative, zero, past or unreadable value is dropped.
 */
export function allowedAnswerHeaders(
  upstream: IncomingHttpHeaders,
  retryAfterMaxSeconds: number,
  now = Date.now(),
): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of ANSWER_HEADERS) {
    // A header the provider sent twice comes as an array (undici): the first one counts, as Node's http client kept it.
    const given = upstream[name];
    const value = Array.isArray(given) ? given[0] : given;
    if (typeof value !== 'string') continue;
    if (name !== 'retry-after') kept[name] = value;
    else {
      const reading = readRetryAfter(value, now, retryAfterMaxSeconds);
      if (reading.kind === 'pause') kept[name] = String(reading.seconds);
    }
  }
  return kept;
}
