// How much public address space a TRUST_PROXY list trusts, computed over the addresses (not the spelling).
import ipaddr from 'ipaddr.js';

/**
 * Express (proxy-addr) compares an IPv4 caller with an IPv6 range through its IPv4-mapped form (`::ffff:a.b.c.d`), so
 * one 128-bit space where IPv4 lives at ::ffff:0:0/96 measures exactly what a list trusts: `::/1` trusts every IPv4
 * caller too, and `::ffff:0:0/96` is every IPv4 address spelled as IPv6.
 */
type Range = readonly [start: bigint, end: bigint];

const IPV4_BASE = 0xffffn << 32n;
const IPV4_SPACE: Range = [IPV4_BASE, IPV4_BASE + (1n << 32n) - 1n];
/**
 * The well-known NAT64 prefix (RFC 6052): behind a translator, every IPv4 caller arrives as 64:ff9b::a.b.c.d, so
 * trust there is trust in the IPv4 addresses it carries, counted (and judged public or not) as IPv4.
 */
const NAT64_BASE = 0x64ff9bn << 96n;
const NAT64_SPACE: Range = [NAT64_BASE, NAT64_BASE + (1n << 32n) - 1n];

/** Express's named subnets, as proxy-addr defines them. */
const PRESETS: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * Addresses no caller on the Internet connects from: private, shared (carrier NAT, which clusters use too), loopback,
 * link-local, benchmarking, multicast and reserved. Trusting these is naming one's own network. Disjoint ranges.
 */
const NOT_PUBLIC_IPV4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/3',
].map(rangeOf);
const NOT_PUBLIC_IPV6 = ['::/128', '::1/128', 'fc00::/7', 'fe80::/10', 'ff00::/8'].map(rangeOf);

export interface PublicCoverage {
  /** Public IPv4 addresses trusted (each counted once however often the list names it). */
  readonly ipv4: bigint;
  /** Public IPv6 addresses trusted, IPv4-mapped ones excluded (they are counted as IPv4). */
  readonly ipv6: bigint;
}

/** The public addresses a TRUST_PROXY list (CIDRs, addresses, Express presets; valid: the schema checked it) trusts. */
export function publicCoverage(entries: readonly string[]): PublicCoverage {
  const ranges = entries.flatMap((entry) => PRESETS[entry] ?? [entry]).map(rangeOf);
  const covered = merge([...ranges, ...ranges.flatMap(asIpv4ThroughNat64)]);
  const ipv4 = overlap(covered, [IPV4_SPACE]);
  const nat64 = overlap(covered, [NAT64_SPACE]);
  const everything = covered.reduce((sum, [start, end]) => sum + end - start + 1n, 0n);
  return {
    ipv4: ipv4 - overlap(covered, NOT_PUBLIC_IPV4),
    ipv6: everything - ipv4 - nat64 - overlap(covered, NOT_PUBLIC_IPV6),
  };
}

/** The part of a range inside the NAT64 prefix, moved onto the IPv4 addresses it carries. */
function asIpv4ThroughNat64([start, end]: Range): Range[] {
  const from = start > NAT64_SPACE[0] ? start : NAT64_SPACE[0];
  const to = end < NAT64_SPACE[1] ? end : NAT64_SPACE[1];
  return from <= to ? [[from - NAT64_BASE + IPV4_BASE, to - NAT64_BASE + IPV4_BASE]] : [];
}

function rangeOf(cidr: string): Range {
  const slash = cidr.indexOf('/');
  const address = ipaddr.parse(slash === -1 ? cidr : cidr.slice(0, slash));
  const ipv4 = address.kind() === 'ipv4';
  const bits = slash === -1 ? (ipv4 ? 32 : 128) : Number(cidr.slice(slash + 1));
  const hostBits = BigInt((ipv4 ? 32 : 128) - bits);
  let value = 0n;
  for (const byte of address.toByteArray()) value = (value << 8n) | BigInt(byte);
  const start = ((value >> hostBits) << hostBits) + (ipv4 ? IPV4_BASE : 0n);
  return [start, start + (1n << hostBits) - 1n];
}

/** Sorted, disjoint ranges covering the same addresses. */
function merge(ranges: Range[]): Range[] {
  const sorted = [...ranges].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const merged: [bigint, bigint][] = [];
  for (const [start, end] of sorted) {
    const last = merged.at(-1);
    if (last && start <= last[1] + 1n) last[1] = end > last[1] ? end : last[1];
    else merged.push([start, end]);
  }
  return merged;
}

/** Addresses in both sets (each a list of disjoint ranges). */
function overlap(a: readonly Range[], b: readonly Range[]): bigint {
  let total = 0n;
  for (const [aStart, aEnd] of a)
    for (const [bStart, bEnd] of b) {
      const start = aStart > bStart ? aStart : bStart;
      const end = aEnd < bEnd ? aEnd : bEnd;
      if (start <= end) total += end - start + 1n;
    }
  return total;
}
