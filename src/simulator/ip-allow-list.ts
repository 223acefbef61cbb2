// The provider's IP whitelisting: upstream paths answer 403 to callers outside the allow-list.
import type { RequestHandler } from 'express';
import type { StatsRecorder } from './stats';
import { FORBIDDEN } from './upstream-responses';

/** `::ffff:127.0.0.1` (an IPv4 caller on a dual-stack socket) is `127.0.0.1`; everything else stays as it is. */
export function normaliseIp(ip: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  return mapped ? mapped[1]! : ip;
}

/**
 * Refuses callers whose socket address is not listed (an empty list admits everyone). The socket address is
 * used, never X-Forwarded-For: the provider sees the TCP peer, and so must the gateway's tests.
 */
export function ipAllowList(allowedIps: readonly string[], stats: StatsRecorder): RequestHandler {
  const allowed = new Set(allowedIps.map(normaliseIp));
  return (req, res, next) => {
    if (allowed.size === 0) return next();
    const ip = normaliseIp(req.socket.remoteAddress ?? '');
    if (allowed.has(ip)) return next();
    stats.increment('forbidden');
    res.status(403).json(FORBIDDEN);
  };
}
