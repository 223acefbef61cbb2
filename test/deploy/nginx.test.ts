// The compose balancer (config/nginx.conf) keeps /metrics off the callers' port in every spelling the gateway itself
// serves as /metrics (issue 42: Express matches case-insensitively and ignores a trailing slash). No nginx runs here:
// the test reads the server's locations and picks one for a URI the way nginx does.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { startTestGateway, type TestGateway } from '../support/in-process-gateway';

const NGINX_CONF = resolve(__dirname, '..', '..', 'config', 'nginx.conf');

interface Location {
  readonly modifier: '=' | '^~' | '~' | '~*' | '';
  readonly pattern: string;
  readonly body: string;
}

/** The `location` blocks of the conf's server, in order (none of them nests a block). */
function locations(conf: string): Location[] {
  const found: Location[] = [];
  for (const match of conf.matchAll(/^\s*location\s+(?:(=|\^~|~\*|~)\s+)?(\S+)\s*\{([^}]*)\}/gm))
    found.push({
      modifier: (match[1] ?? '') as Location['modifier'],
      pattern: match[2] ?? '',
      body: match[3] ?? '',
    });
  return found;
}

/**
 * nginx's choice (ngx_http_core_module, "location"): an exact match wins; otherwise the longest prefix is
 * remembered, and used at once if it is `^~`; otherwise the first matching regular expression in the file's order;
 * otherwise the longest prefix.
 */
function chooseLocation(all: readonly Location[], uri: string): Location | undefined {
  const exact = all.find((l) => l.modifier === '=' && l.pattern === uri);
  if (exact) return exact;
  const prefixes = all
    .filter((l) => (l.modifier === '' || l.modifier === '^~') && uri.startsWith(l.pattern))
    .sort((a, b) => b.pattern.length - a.pattern.length);
  const longest = prefixes[0];
  if (longest?.modifier === '^~') return longest;
  const regex = all.find(
    (l) =>
      (l.modifier === '~' || l.modifier === '~*') &&
      new RegExp(l.pattern, l.modifier === '~*' ? 'i' : '').test(uri),
  );
  return regex ?? longest;
}

/** The URI nginx matches locations against: the path only, percent-decoded, slashes merged, dot segments resolved. */
function nginxUri(target: string): string {
  const path = decodeURIComponent((target.split('?')[0] ?? '').split('#')[0] ?? '').replace(/\/{2,}/g, '/');
  const segments: string[] = [];
  for (const segment of path.split('/').slice(1))
    if (segment === '..') segments.pop();
    else if (segment !== '.') segments.push(segment);
  return `/${segments.join('/')}`;
}

const blocked = (location: Location | undefined) => /\breturn\s+404\s*;/.test(location?.body ?? '');
const forwarded = (location: Location | undefined) =>
  /\bproxy_pass\s+http:\/\/gateways\s*;/.test(location?.body ?? '');

/** Spellings a caller could try; the gateway decides which of them are its /metrics. */
const CANDIDATES = [
  '/metrics',
  '/METRICS',
  '/Metrics',
  '/metrics/',
  '/METRICS/',
  '/metrics?format=text',
  '/%6detrics',
  '/%6D%45TRICS/',
  '//metrics',
  '/metrics//',
  '/x/../metrics',
];

describe('config/nginx.conf', () => {
  const all = locations(readFileSync(NGINX_CONF, 'utf8'));

  test('blocks /metrics by a case-insensitive prefix rule, whatever the case or a trailing slash', () => {
    const rule = all.find((l) => blocked(l) && l.modifier === '~*');
    expect(rule?.pattern).toMatch(/^\^\/metrics/);
    for (const uri of ['/metrics', '/METRICS', '/Metrics', '/metrics/', '/MeTrIcS/', '/metrics/anything'])
      expect([uri, blocked(chooseLocation(all, uri))]).toEqual([uri, true]);
  });

  test('still forwards the operations, the probes and the sessions to the gateways', () => {
    for (const uri of [
      '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992',
      '/api/validation/document',
      '/healthz',
      '/readyz',
      '/openapi.json',
      '/bff/login',
    ])
      expect([uri, forwarded(chooseLocation(all, uri))]).toEqual([uri, true]);
  });

  describe('against the spellings the gateway serves as /metrics (METRICS_ON_MAIN_PORT)', () => {
    let gateway: TestGateway;
    beforeAll(async () => {
      // Local mode serves /metrics on the main port, as METRICS_ON_MAIN_PORT=true does in compose.
      gateway = await startTestGateway({});
    });
    afterAll(async () => {
      await gateway?.close();
    });

    test('every spelling that reaches the metrics is blocked by the balancer', async () => {
      const served: string[] = [];
      for (const target of CANDIDATES) {
        const res = await fetch(gateway.url + target);
        const text = await res.text();
        if (res.status === 200 && text.includes('# HELP')) served.push(target);
      }
      // The gateway does serve more than the exact path: the reason for a prefix rule.
      expect(served).toEqual(expect.arrayContaining(['/metrics', '/METRICS', '/metrics/']));
      for (const target of served)
        expect([target, blocked(chooseLocation(all, nginxUri(target)))]).toEqual([target, true]);
    });
  });
});
