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
 * IPv6 ranges whose addresses carry an IPv4 address a caller chooses, so trusting (part of) them is trusting those
 * IPv4 addresses: counted, and judged public or not, as the IPv4 they carry, never as IPv6.
 * - NAT64 (RFC 6052, 64:ff9b::/96): behind a translator every IPv4 caller arrives as 64:ff9b::a.b.c.d.
 * - 6to4 (RFC 3056, 2002::/16): 2002:AABB:CCDD::/48 is the site of the IPv4 host AA.BB.CC.DD.
 * - Teredo (RFC 4380, 2001::/32): 2001:0:<server>:<flags>:<port>:<client> with the client's public IPv4 in the last
 *   32 bits, inverted. Any host on the Internet can get one, so `2001::/32` trusts every IPv4 caller (issue 38).
 * (IPv4-mapped ::ffff:0:0/96 is where IPv4 itself lives in this space.)
 */
interface Carrier {
  readonly space: Range;
  /** The IPv4 ranges (at IPV4_BASE) that the part `[from, to]` of `space` carries. */
  readonly carried: (from: bigint, to: bigint) => Range[];
}

const IPV4_MASK = (1n << 32n) - 1n;

function spaceOf(prefix: bigint, bits: number): Range {
  const hostBits = BigInt(128 - bits);
  return [prefix << hostBits, (prefix << hostBits) + (1n << hostBits) - 1n];
}

const NAT64: Carrier = {
  space: spaceOf(0x64ff9bn, 32), // 64:ff9b::/96
  carried: (from, to) => [[IPV4_BASE + (from & IPV4_MASK), IPV4_BASE + (to & IPV4_MASK)]],
};
const SIX_TO_FOUR: Carrier = {
  space: spaceOf(0x2002n, 16),
  // The IPv4 address is the 32 bits after the prefix: a run of addresses carries a run of IPv4 addresses.
  carried: (from, to) => [[IPV4_BASE + ((from >> 80n) & IPV4_MASK), IPV4_BASE + ((to >> 80n) & IPV4_MASK)]],
};
const TEREDO: Carrier = {
  space: spaceOf(0x20010000n, 32),
  carried: (from, to) => {
    // The client is the low 32 bits, inverted: a run within one /96 carries one run; a run over several, more.
    const inverted = (low: bigint, high: bigint): Range => [
      IPV4_BASE + (~high & IPV4_MASK),
      IPV4_BASE + (~low & IPV4_MASK),
    ];
    const span = (to >> 32n) - (from >> 32n);
    if (span === 0n) return [inverted(from & IPV4_MASK, to & IPV4_MASK)];
    if (span === 1n) return [inverted(from & IPV4_MASK, IPV4_MASK), inverted(0n, to & IPV4_MASK)];
    return [IPV4_SPACE];
  },
};
const CARRIERS = [NAT64, SIX_TO_FOUR, TEREDO];

/** The private blocks (RFC 1918 and RFC 4193), Express's `uniquelocal`. */
const PRIVATE_BLOCKS = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'];

/** Express's named subnets, as proxy-addr defines them. */
const PRESETS: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: PRIVATE_BLOCKS,
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
  const ranges = rangesOf(entries);
  const covered = merge([...ranges, ...ranges.flatMap(carriedIpv4)]);
  const ipv4 = overlap(covered, [IPV4_SPACE]);
  const carriers = overlap(
    covered,
    CARRIERS.map((carrier) => carrier.space),
  );
  const everything = covered.reduce((sum, [start, end]) => sum + end - start + 1n, 0n);
  return {
    ipv4: ipv4 - overlap(covered, NOT_PUBLIC_IPV4),
    ipv6: everything - ipv4 - carriers - overlap(covered, NOT_PUBLIC_IPV6),
  };
}

/** The parts of a range inside the carrier prefixes, moved onto the IPv4 addresses they carry. */
function carriedIpv4([start, end]: Range): Range[] {
  return CARRIERS.flatMap(({ space, carried }) => {
    const from = start > space[0] ? start : space[0];
    const to = end < space[1] ? end : space[1];
    return from <= to ? carried(from, to) : [];
  });
}

/**
 * The INBOUND_ALLOW_CIDRS entries that share an address with the TRUST_PROXY ranges. A caller there is trusted as a
 * proxy, so it writes its own X-Forwarded-For and the allow-list checks whatever address it claims (issue 42).
 * Compared as Express compares: an IPv4 entry meets an IPv6 range through ::ffff:a.b.c.d.
 */
export function allowedInsideTrusted(trusted: readonly string[], allowed: readonly string[]): string[] {
  const covered = merge(rangesOf(trusted));
  return allowed.filter((entry) => overlap(covered, [rangeOf(entry)]) > 0n);
}

/**
 * Whole private blocks (RFC 1918, RFC 4193) inside the TRUST_PROXY ranges: every workload of the network there
 * (a neighbour pod, a compromised job) is then a trusted proxy that can claim any address. Worth a warning, not a
 * refusal: a small private network may have nothing else in it.
 */
export function wholePrivateBlocks(trusted: readonly string[]): string[] {
  const covered = merge(rangesOf(trusted));
  const whole = (block: string) => {
    const range = rangeOf(block);
    return overlap(covered, [range]) === range[1] - range[0] + 1n;
  };
  const blocks = PRIVATE_BLOCKS.filter(whole);
  // RFC 4193 assigns only fd00::/8 (fc00::/8 is undefined): trusting it is trusting every unique local address in use.
  return !blocks.includes('fc00::/7') && whole('fd00::/8') ? [...blocks, 'fd00::/8'] : blocks;
}

/** CIDRs, addresses and Express presets, as ranges of the one 128-bit space. */
function rangesOf(entries: readonly string[]): Range[] {
  return entries.flatMap((entry) => PRESETS[entry] ?? [entry]).map(rangeOf);
}

function rangeOf(cidr: string): Range {
  const slash = cidr.indexOf('/');
  const address = ipaddr.parse(hexTail(slash === -1 ? cidr : cidr.slice(0, slash)));
  const ipv4 = address.kind() === 'ipv4';
  const bits = slash === -1 ? (ipv4 ? 32 : 128) : Number(cidr.slice(slash + 1));
  const hostBits = BigInt((ipv4 ? 32 : 128) - bits);
  let value = 0n;
  for (const byte of address.toByteArray()) value = (value << 8n) | BigInt(byte);
  const start = ((value >> hostBits) << hostBits) + (ipv4 ? IPV4_BASE : 0n);
  return [start, start + (1n << hostBits) - 1n];
}

/**
 * An IPv6 address with a dotted IPv4 tail in hex groups (`::1.2.3.4` -> `::102:304`): ipaddr.js reads only the
 * `::ffff:` form, and INBOUND_ALLOW_CIDRS takes every spelling Node takes.
 */
function hexTail(address: string): string {
  const tail = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address);
  if (!tail) return address;
  const group = (high: number, low: number) => ((high << 8) | low).toString(16);
  return `${tail[1]}${group(Number(tail[2]), Number(tail[3]))}:${group(Number(tail[4]), Number(tail[5]))}`;
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
