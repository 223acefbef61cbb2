// Optional network allow-list (INBOUND_ALLOW_CIDRS) on the caller address Express derives under TRUST_PROXY.
import { BlockList, isIPv4 } from 'node:net';
import type { RequestHandler } from 'express';
import { GatewayError } from '../http/gateway-error';
import type { AuthFailureLog } from '../observability/auth-failure-log';
import { clientIpKey } from './shared-counter-store';

/** Builds a BlockList (used here as an allow list) from CIDRs or plain addresses, IPv4 and IPv6. */
export function cidrList(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of cidrs) {
    const [address = '', bits] = entry.trim().split('/');
    const family = isIPv4(address) ? 'ipv4' : 'ipv6';
    const prefix = bits === undefined ? (family === 'ipv4' ? 32 : 128) : Number(bits);
    list.addSubnet(address, prefix, family);
  }
  return list;
}

/** True when `ip` is in the list; an IPv4-mapped IPv6 address (::ffff:10.0.0.1) also matches IPv4 entries. */
export function inList(list: BlockList, ip: string): boolean {
  if (isIPv4(ip)) return list.check(ip, 'ipv4');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1];
  if (mapped !== undefined && list.check(mapped, 'ipv4')) return true;
  try {
    return list.check(ip, 'ipv6');
  } catch {
    return false;
  }
}

/**
 * 403 CLIENT_FORBIDDEN for callers outside `cidrs`; an empty list lets everyone in. `req.ip` is the socket
 * peer unless TRUST_PROXY names the proxies in front (hop count or CIDRs), so X-Forwarded-For cannot be forged.
 * Refusals are counted per address in `failureLog` (one line per address and interval), never logged one by one:
 * a flood from outside must not become a flood of log lines.
 */
export function inboundAllowList(cidrs: readonly string[], failureLog: AuthFailureLog): RequestHandler {
  if (cidrs.length === 0) return (_req, _res, next) => next();
  const list = cidrList(cidrs);
  return (req, res, next) => {
    const ip = req.ip;
    if (ip !== undefined && inList(list, ip)) {
      next();
      return;
    }
    res.locals.quiet = true;
    failureLog.outsideAllowList(clientIpKey(req), req.id);
    next(new GatewayError('CLIENT_FORBIDDEN', 'The caller address is not allowed to reach the gateway.'));
  };
}
