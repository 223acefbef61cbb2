// The security headers of every answer (helmet), chosen for a JSON API rather than for HTML pages.
import type { RequestHandler } from 'express';
import helmet from 'helmet';

/**
 * What protects a JSON answer that a browser might load: no content may run or be framed (CSP `default-src 'none';
 * frame-ancestors 'none'`, X-Frame-Options DENY), no MIME sniffing, HTTPS only (HSTS), no referrer, no cross-origin
 * embedding outside CORS (CORP). Helmet's policies for HTML documents are off: Cross-Origin-Opener-Policy and
 * Origin-Agent-Cluster (documents and windows), X-DNS-Prefetch-Control (links in pages), X-Download-Options (IE 8),
 * X-Permitted-Cross-Domain-Policies (Flash and Acrobat) and X-XSS-Protection (helmet only turns the old filter off).
 * They protect nothing on an API answer and cost a header on every one of them (about 300 bytes less per answer).
 */
export function apiHelmet(): RequestHandler {
  return helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] },
    },
    xFrameOptions: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    crossOriginResourcePolicy: { policy: 'same-origin' },
    crossOriginOpenerPolicy: false,
    originAgentCluster: false,
    xDnsPrefetchControl: false,
    xDownloadOptions: false,
    xPermittedCrossDomainPolicies: false,
    xXssProtection: false,
  });
}

/**
 * The headers helmet sets with the options above, asked of helmet once. None of them depends on the request (no CSP
 * nonce, no per-request directive): helmet run on every request would compute the same list each time through seven
 * middleware of its own. test/unit/http/security-headers.test.ts holds this list to helmet's own answer.
 */
export const SECURITY_HEADERS: readonly (readonly [name: string, value: string])[] = (() => {
  const headers: [string, string][] = [];
  const recorder = {
    setHeader(name: string, value: string | number | readonly string[]) {
      headers.push([name.toLowerCase(), String(value)]);
    },
    removeHeader() {},
  };
  let finished = false;
  (apiHelmet() as (req: unknown, res: unknown, next: (error?: unknown) => void) => void)(
    {},
    recorder,
    (error) => {
      if (error) throw error;
      finished = true;
    },
  );
  if (!finished) throw new Error('helmet did not finish synchronously: its headers cannot be taken once');
  return headers;
})();

/** Sets SECURITY_HEADERS on every answer (and drops an X-Powered-By, as helmet does). */
export function securityHeaders(): RequestHandler {
  return (_req, res, next) => {
    for (const [name, value] of SECURITY_HEADERS) res.setHeader(name, value);
    res.removeHeader('x-powered-by');
    next();
  };
}
