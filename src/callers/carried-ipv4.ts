// The IPv4 caller an IPv6 address stands for, when the address is a translation or tunnel form that carries it.
import { isIPv6 } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The IPv4 address carried in the bits of a NAT64, 6to4 or Teredo address, else undefined. The limiters count IPv6
 * per /56 (express-rate-limit), which is right for native IPv6 but not for these: every IPv4 caller behind one NAT64
 * translator, or one Teredo server, would be a single caller (one abuser blocks them all), and one 6to4 site 256.
 * The same ranges config/trust-proxy-coverage.ts counts as the IPv4 they carry.
 * - NAT64 (RFC 6052, 64:ff9b::/96): the last 32 bits.
 * - 6to4 (RFC 3056, 2002::/16): the 32 bits after the prefix.
 * - Teredo (RFC 4380, 2001::/32): the last 32 bits, inverted.
 */
export function carriedIpv4(ip: string): string | undefined {
  const groups = isIPv6(ip) ? groupsOf(ip) : undefined;
  if (!groups) return undefined;
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = groups;
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return dotted(g6, g7);
  if (g0 === 0x2002) return dotted(g1 ?? 0, g2 ?? 0);
  if (g0 === 0x2001 && g1 === 0) return dotted(~g6 & 0xffff, ~g7 & 0xffff);
  return undefined;
}

/** The eight 16-bit groups of any IPv6 spelling Node takes (a dotted IPv4 tail, a zone id), or undefined. */
function groupsOf(ip: string): number[] | undefined {
  try {
    // WHATWG URL writes every spelling in hex groups, which ipaddr.js reads; the zone id is no part of the address.
    const host = new URL(`http://[${ip.replace(/%.*$/, '')}]/`).hostname;
    return ipaddr.IPv6.parse(host.slice(1, -1)).parts;
  } catch {
    return undefined;
  }
}

function dotted(high: number, low: number): string {
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}
