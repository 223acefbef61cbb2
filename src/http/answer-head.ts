// Headers that every answer of an app carries, whatever its route, added as its head is written.
import type { ServerResponse } from 'node:http';
import type { Express } from 'express';
import { SECURITY_HEADERS } from './security-headers';

/** A header name (lower case) and its value. */
export type FixedHeader = readonly [name: string, value: string];

type WriteHead = ServerResponse['writeHead'];

/**
 * Every answer of `app` carries `headers`, unless something on the way set its own value: the same outcome as a first
 * middleware that sets them (later setters win), but written as the answer's head goes out, not when the request
 * arrives. A call waiting on the provider then holds no copy of them: a response's header map is built per request
 * and lives as long as it does, and with 1,000 calls in flight each header held is copied by every scavenge of the
 * young generation that the call lives through (bench/README.md, "Figures behind code choices"). An answer that is
 * never written (the caller hung up) never builds them.
 *
 * Installed on `app.response`, the prototype of every response of the app (Express's own, or the class
 * expressMessageClasses gives the server, which copies it); Node's `end()`, `write()` and `flushHeaders()` all go
 * through `writeHead`. Nothing here is for a header whose value depends on the request.
 *
 * Until the head is written these headers are not on the response: a route that removes one (`removeHeader`) gets it
 * back, one that appends to one (`res.append`) replaces it, and `res.getHeader` does not see it (so `res.sendFile`
 * and `express.static` would set their own `Cache-Control`). The gateway does none of these
 * (test/unit/http/answer-head-adv.test.ts holds its answers to the headers); a route that must, sets its own value.
 */
export function headersOnEveryAnswer(app: Express, headers: readonly FixedHeader[]): void {
  const response = app.response as unknown as ServerResponse;
  const writeHead: WriteHead = response.writeHead;
  const withFixedHeaders = function (
    this: ServerResponse,
    statusCode: number,
    reason?: unknown,
    given?: unknown,
  ): ServerResponse {
    // A second writeHead throws in Node's own, as before (nothing set here first).
    if (!this.headersSent)
      for (const [name, value] of headers) if (!this.hasHeader(name)) this.setHeader(name, value);
    return (writeHead as (this: ServerResponse, ...args: unknown[]) => ServerResponse).call(
      this,
      statusCode,
      reason,
      given,
    );
  };
  Object.defineProperty(response, 'writeHead', {
    configurable: true,
    writable: true,
    value: withFixedHeaders,
  });
}

/**
 * What every answer of the gateway carries (added as the head is written by headersOnEveryAnswer, unless the route set
 * its own):
 * - the security headers (helmet, JSON-API profile);
 * - `Cache-Control: no-store`: no answer may be kept by a browser, proxy or CDN. Plans and verdicts are one
 *   caller's data, and errors must not outlive their cause; upstream caching headers never pass;
 * - in local mode, `X-Upstream: simulator`, so nobody mistakes an answer of the bundled simulator for the provider's.
 */
export function fixedAnswerHeaders(options: { readonly localMode: boolean }): FixedHeader[] {
  return [
    ...SECURITY_HEADERS,
    ['cache-control', 'no-store'],
    ...(options.localMode ? [['x-upstream', 'simulator'] as const] : []),
  ];
}
