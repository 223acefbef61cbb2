// Provider answers outside any operation's contract, read or streamed: never passed on as the provider's verdict.
// - A redirect (3xx) is followed by nobody and passed to nobody: its Location names the provider's addresses, which no
//   caller learns, and no caller could follow it past the gateway. It nearly always means a wrong UPSTREAM_BASE_URL
//   (http where the provider redirects to https, another host, a missing path), so the operator is told where it
//   pointed: the origin only, never the path or query (they may carry ids).
// - A 4xx whose body is not JSON is not the provider's API answering (the HTML page of a load balancer in front of it,
//   a wrong path): nothing a caller could read as the provider's refusal.
// Both end the call as a failure (502 UPSTREAM_UNAVAILABLE) and as no provider answer: nothing billed, a keyed request's
// claim released. But a 303 See Other to a method that is not safe (a POST, PUT, PATCH, DELETE) says the provider did
// act on it (RFC 9110, 15.4.4): that call ends on a provider answer (billed as the account's billable set says, and a
// keyed request's 502 kept, so a retry is never sent twice). A closed circuit does not count them (SPEC: 5xx,
// timeouts, connection errors): a caller who can make a WAF in front of the provider answer its HTML 400 must not open
// the operation's circuit for every other caller. A half-open circuit's probe that gets one fails, so a page served
// during an outage cannot close the circuit either.
import type { IncomingHttpHeaders } from 'node:http';
import { GatewayError } from '../../http/gateway-error';

/**
 * The caller's 502 for an answer outside the contract. Not counted by the circuit while it is closed (a caller must not
 * open it); a half-open circuit's probe that gets one fails (an outage behind a load balancer's page is not over).
 */
export class OffContractAnswer extends GatewayError {
  constructor() {
    super(
      'UPSTREAM_UNAVAILABLE',
      'The upstream answered with a redirect or an error page instead of its API: the gateway passes neither on.',
    );
  }
}

export function isRedirect(status: number): boolean {
  return status >= 300 && status <= 399;
}

/** A 303 See Other to a method that is not safe: the provider acted on the request, and points at its result. */
export function actedAndRedirected(status: number, method: string): boolean {
  return status === 303 && method !== 'GET';
}

/** The answer is labelled JSON (application/json, application/problem+json, text/json, ...). */
export function isJson(headers: IncomingHttpHeaders): boolean {
  return /json/i.test(String(headers['content-type'] ?? ''));
}

/** A 4xx with a body that is not JSON. */
export function isForeignRefusal(status: number, headers: IncomingHttpHeaders, hasBody: boolean): boolean {
  return status >= 400 && status <= 499 && hasBody && !isJson(headers);
}

/**
 * Whether a streamed answer's head may be followed by a body: anything but `Content-Length: 0` (without a length, chunks
 * or the bytes up to the connection's close follow, as an HTTP/1.0 error page sends them).
 */
export function announcesBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return length === undefined || Number(length) > 0;
}

/** The log fields of a redirect: its status and the origin of its Location, read against the upstream base URL. */
export function redirectFields(
  status: number,
  location: string | readonly string[] | undefined,
  baseUrl: string,
): { status: number; locationOrigin: string; sameOrigin: boolean } {
  const first = Array.isArray(location) ? location[0] : location;
  const base = new URL(baseUrl);
  let origin = 'none';
  if (typeof first === 'string' && first !== '') {
    try {
      origin = new URL(first, base).origin;
    } catch {
      origin = 'unreadable';
    }
  }
  return { status, locationOrigin: origin, sameOrigin: origin === base.origin };
}

export const REDIRECT_MESSAGE =
  'upstream answered a redirect: the gateway follows none and passes none (502); check UPSTREAM_BASE_URL (scheme, host, path)';
export const FOREIGN_REFUSAL_MESSAGE =
  'upstream answered a 4xx that is not JSON: not passed on (502); check UPSTREAM_BASE_URL and what fronts the provider';
