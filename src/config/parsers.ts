// Parsers for the few variables whose format is richer than a zod primitive.
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

export type TrustProxySetting = false | number | string[];

const NAMED_SUBNETS = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * `TRUST_PROXY`: `false`, a hop count, or a comma list of CIDRs / addresses / Express subnet names.
 * `true` is refused: trusting every hop lets any caller forge X-Forwarded-For and defeat the CIDR allow-list; so is
 * a CIDR of every address (`0.0.0.0/0`, `::/0`), which is `true` spelled differently.
 */
export function parseTrustProxy(raw: string): TrustProxySetting {
  const value = raw.trim();
  if (value === '' || value === 'false' || value === '0') return false;
  if (value === 'true')
    throw new Error('must be a hop count or a list of CIDRs; "true" would trust any caller');
  if (/^[1-9][0-9]*$/.test(value)) return Number(value);
  const entries = value.split(',').map((s) => s.trim());
  for (const entry of entries) {
    if (!NAMED_SUBNETS.has(entry) && !isCidr(entry))
      throw new Error('must be a hop count or a list of CIDRs');
    // Express matches with ipaddr.js, which refuses some IPv6 spellings Node takes (`64:ff9b::10.0.0.0`, `::1.2.3.4`):
    // refuse them here, naming the variable, rather than let Express throw at start.
    if (!NAMED_SUBNETS.has(entry) && !ipaddr.isValid(entry.split('/')[0] ?? ''))
      throw new Error(
        `cannot read "${entry}" the way Express matches addresses; write an IPv6 address in hex groups (64:ff9b::a00:0)`,
      );
    // By the number, not the spelling: `0.0.0.0/00` is every address too (and proxy-addr throws on it at start).
    if (/\/0+$/.test(entry))
      throw new Error('must name the proxies; a CIDR of every address would trust any caller, like "true"');
  }
  return entries;
}

/**
 * Whether a URL (valid: the schema checked it) is https, its scheme read the way a URL reads it: `HTTP://` is plain
 * http and `HTTPS://` is https, whatever a string prefix test would say.
 */
export function isHttpsUrl(url: string): boolean {
  return new URL(url).protocol === 'https:';
}

export function isCidr(value: string): boolean {
  const [address, bits, ...rest] = value.split('/');
  if (rest.length > 0 || !address) return false;
  const family = isIP(address);
  if (family === 0) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * What an HTTP client may send as a header value (tab, visible ASCII, Latin-1), as undici and Node's http check it:
 * anything else (a control character, a character beyond Latin-1 such as "€") would make every upstream call fail.
 */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const RESERVED_HEADERS = new Set([
  'authorization',
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  // Connection-level: the upstream client owns the connection (undici refuses them on a request).
  'keep-alive',
  'upgrade',
  'expect',
  'te',
  'cookie',
  'x-request-id',
  // Per call: the caller's key where the operation forwards it (SPEC §13), never one value for every call.
  'idempotency-key',
]);

/**
 * `UPSTREAM_STATIC_HEADERS`: headers sent on every upstream call, as a JSON object
 * (`{"x-version":"LPV3"}`) or as `name: value` pairs separated by `;` (`x-version: LPV3`).
 */
export function parseStaticHeaders(raw: string): Record<string, string> {
  const text = raw.trim();
  if (text === '') return {};
  let pairs: [string, unknown][];
  if (text.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new Error('is not valid JSON');
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('must be an object');
    pairs = Object.entries(parsed);
  } else {
    pairs = text
      .split(';')
      .filter((part) => part.trim() !== '')
      .map((part) => {
        const colon = part.indexOf(':');
        if (colon <= 0) throw new Error('must be "name: value" pairs separated by ";"');
        return [part.slice(0, colon).trim(), part.slice(colon + 1).trim()];
      });
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of pairs) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name)) throw new Error(`has an invalid header name "${name}"`);
    if (RESERVED_HEADERS.has(lower)) throw new Error(`may not set ${lower}: the gateway owns that header`);
    if (typeof value !== 'string' || !HEADER_VALUE.test(value))
      throw new Error(`has an invalid value for ${lower}`);
    headers[lower] = value;
  }
  return headers;
}

export function parseHostPorts(entries: readonly string[]): { host: string; port: number }[] {
  return entries.map((entry) => {
    const colon = entry.lastIndexOf(':');
    return { host: entry.slice(0, colon), port: Number(entry.slice(colon + 1)) };
  });
}

/** A 32-byte AES-256 key given in base64. */
export function parseEncryptionKey(raw: string): Buffer {
  const key = Buffer.from(raw.trim(), 'base64');
  if (key.length !== 32) throw new Error('must be 32 bytes encoded in base64 (openssl rand -base64 32)');
  return key;
}
