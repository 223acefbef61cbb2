// CORS for browser apps: only CORS_ORIGINS and the registry clients' origins, preflight answered here.
import type { RequestHandler, Response } from 'express';
import { GatewayError } from '../http/gateway-error';
import { type ClientRegistry, normalizeOrigin } from './client-registry';

export interface CorsOptions {
  /** CORS_ORIGINS. */
  readonly origins: readonly string[];
  /** Read on every request, so a registry reload adds or removes origins without a restart. */
  readonly registry?: Pick<ClientRegistry, 'allOrigins'>;
  /** How long a browser may cache a preflight answer. Default 600 s (Chromium caps at 7200). */
  readonly maxAgeSeconds?: number;
}

export const CORS_ALLOWED_METHODS = ['GET', 'POST'];
/** X-Upstream-Account: a browser app picks one of its provider accounts (SPEC §10). */
export const CORS_ALLOWED_HEADERS = [
  'content-type',
  'authorization',
  'x-api-key',
  'x-request-id',
  'x-upstream-account',
  'idempotency-key',
];
/** Response headers a page's script may read besides the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = [
  'X-Request-Id',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'X-Upstream-Account',
  'Idempotent-Replayed',
];

/**
 * An allowed origin gets its own origin echoed (never `*`) with `Vary: Origin`; a foreign origin gets no CORS
 * header at all, so the browser withholds the answer from the page. A foreign preflight is refused with 403.
 * Credentials mode is not enabled: cross-origin callers authenticate with headers; the browser-session cookie
 * (src/sessions) serves same-origin pages only, and a foreign origin's preflight for it is refused here.
 *
 * Per-client origins are pooled with CORS_ORIGINS: a preflight carries no credential, so the gateway cannot know
 * which client is asking. The credential on the actual request still decides what the page may do.
 */
export function cors(options: CorsOptions): RequestHandler {
  const configured = new Set(options.origins.map(normalizeOrigin));
  const maxAge = String(options.maxAgeSeconds ?? 600);
  const methods = CORS_ALLOWED_METHODS.join(', ');
  const headers = CORS_ALLOWED_HEADERS.join(', ');
  const exposed = CORS_EXPOSED_HEADERS.join(', ');
  const allowed = (origin: string) => {
    const normalized = normalizeOrigin(origin);
    return configured.has(normalized) || options.registry?.allOrigins().has(normalized) === true;
  };

  return (req, res, next) => {
    varyByOrigin(res);
    const origin = req.headers.origin;
    if (typeof origin !== 'string') {
      next();
      return;
    }
    const ok = allowed(origin);
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    if (preflight) {
      if (!ok) {
        next(new GatewayError('CLIENT_FORBIDDEN', 'This origin may not call the gateway from a browser.'));
        return;
      }
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Methods', methods);
      res.setHeader('Access-Control-Allow-Headers', headers);
      res.setHeader('Access-Control-Max-Age', maxAge);
      res.vary('Access-Control-Request-Headers');
      res.status(204).end();
      return;
    }
    if (ok) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Expose-Headers', exposed);
    }
    next();
  };
}

/** `Vary: Origin` on every answer: caches must not hand one origin's answer to another. */
function varyByOrigin(res: Response): void {
  // Nothing before this middleware sets Vary: set it outright rather than parse and merge (res.vary) per request.
  if (res.hasHeader('vary')) res.vary('Origin');
  else res.setHeader('Vary', 'Origin');
}
