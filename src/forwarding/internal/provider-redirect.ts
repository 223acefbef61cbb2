// A provider's redirect (3xx) is never followed and never passed on: its Location names the provider's addresses, which
// no caller learns, and a caller cannot follow it past the gateway anyway. It nearly always means a wrong
// UPSTREAM_BASE_URL (http where the provider redirects to https, another host, a missing path), so the operator is told
// where it pointed: the origin only, never the path or query (they may carry ids).

export function isRedirect(status: number): boolean {
  return status >= 300 && status <= 399;
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
