// Where a login may send the browser back to: a path on the gateway's own origin, never anywhere else.

const MAX_LENGTH = 2048;
/** Control characters, backslashes and whitespace have no place in a path a browser is sent to. */
const forbidden = (text: string) =>
  [...text].some((c) => {
    const code = c.charCodeAt(0);
    return code <= 0x20 || (code >= 0x7f && code <= 0x9f) || c === '\\';
  });

/**
 * The relative path to return to, or undefined when `value` could lead off the origin: absolute URLs, scheme-relative
 * `//host`, `/\host`, schemes, and the same spelled percent-encoded (once or more) are all refused.
 */
export function safeReturnTo(value: string | null, origin: string): string | undefined {
  if (value === null || value === '') return '/';
  if (value.length > MAX_LENGTH || !value.startsWith('/')) return undefined;
  let decoded = value;
  for (let round = 0; round < 4; round++) {
    if (forbidden(decoded) || decoded.startsWith('//')) return undefined;
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      return undefined;
    }
    if (next === decoded) break;
    decoded = next;
  }
  const resolved = new URL(value, origin);
  const path = `${resolved.pathname}${resolved.search}${resolved.hash}`;
  // Dot segments can normalize into a scheme-relative `//host` (`/.//evil`): check what the browser will receive.
  if (resolved.origin !== origin || path.startsWith('//') || forbidden(path)) return undefined;
  // The gateway's own /bff routes (matched case-insensitively): returning there loops logins or spends a state.
  const paths = [resolved.pathname, new URL(decoded, origin).pathname].map((p) => p.toLowerCase());
  if (paths.some((p) => p === '/bff' || p.startsWith('/bff/'))) return undefined;
  return path;
}
