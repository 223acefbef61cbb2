// The public addresses a TRUST_PROXY list trusts, counted over addresses: spelling, overlap and IPv4-mapping aside.
import {
  allowedInsideTrusted,
  publicCoverage,
  wholePrivateBlocks,
} from '../../../src/config/trust-proxy-coverage';

const ALL_IPV4 = 1n << 32n;
/** IPv4 that no Internet caller connects from (private, shared, loopback, link-local, benchmarking, 224/3, 0/8). */
const NOT_PUBLIC_IPV4 =
  (1n << 24n) * 3n + (1n << 22n) + (1n << 16n) + (1n << 20n) + (1n << 16n) + (1n << 17n) + (1n << 29n);

describe('publicCoverage', () => {
  it('counts nothing public in private ranges and the presets', () => {
    expect(publicCoverage(['10.0.0.0/8', 'loopback', 'linklocal', 'uniquelocal', '100.64.0.0/10'])).toEqual({
      ipv4: 0n,
      ipv6: 0n,
    });
  });

  it('counts every public IPv4 address for the two halves, once however often they overlap', () => {
    const everyone = { ipv4: ALL_IPV4 - NOT_PUBLIC_IPV4 };
    expect(publicCoverage(['0.0.0.0/1', '128.0.0.0/1'])).toMatchObject(everyone);
    expect(publicCoverage(['0.0.0.0/1', '128.0.0.0/1', '0.0.0.0/2', '10.0.0.0/8'])).toMatchObject(everyone);
  });

  it('counts IPv4 trusted through an IPv6 range, as Express matches IPv4 callers (::ffff:a.b.c.d)', () => {
    expect(publicCoverage(['::ffff:0:0/96']).ipv4).toBe(ALL_IPV4 - NOT_PUBLIC_IPV4);
    expect(publicCoverage(['::/1']).ipv4).toBe(ALL_IPV4 - NOT_PUBLIC_IPV4);
    expect(publicCoverage(['::ffff:203.0.113.0/120'])).toEqual({ ipv4: 256n, ipv6: 0n });
  });

  it('counts IPv4 trusted through the NAT64 prefix (64:ff9b::a.b.c.d) as the IPv4 addresses it carries', () => {
    expect(publicCoverage(['64:ff9b::/96'])).toEqual({ ipv4: ALL_IPV4 - NOT_PUBLIC_IPV4, ipv6: 0n });
    expect(publicCoverage(['64:ff9b::/96', '0.0.0.0/1', '128.0.0.0/1']).ipv4).toBe(
      ALL_IPV4 - NOT_PUBLIC_IPV4,
    );
    expect(publicCoverage(['64:ff9b::cb00:7100/120'])).toEqual({ ipv4: 256n, ipv6: 0n });
    expect(publicCoverage(['64:ff9b::a00:0/104'])).toEqual({ ipv4: 0n, ipv6: 0n });
    expect(publicCoverage(['64::/16']).ipv4).toBe(ALL_IPV4 - NOT_PUBLIC_IPV4);
  });

  it('counts IPv6 apart from the mapped IPv4 and the unique-local, link-local and multicast ranges', () => {
    expect(publicCoverage(['2001:db8::/32'])).toEqual({ ipv4: 0n, ipv6: 1n << 96n });
    expect(publicCoverage(['8000::/1']).ipv6).toBe((1n << 127n) - (1n << 121n) - (1n << 118n) - (1n << 120n));
  });

  it('counts a single address, and a CIDR written with host bits, by its network', () => {
    expect(publicCoverage(['203.0.113.7'])).toEqual({ ipv4: 1n, ipv6: 0n });
    expect(publicCoverage(['203.0.113.7/24'])).toEqual({ ipv4: 256n, ipv6: 0n });
  });

  it('counts Teredo (2001::/32) as the IPv4 clients it carries: the whole prefix is every IPv4 caller (issue 38)', () => {
    expect(publicCoverage(['2001::/32'])).toEqual({ ipv4: ALL_IPV4 - NOT_PUBLIC_IPV4, ipv6: 0n });
    // One Teredo server's clients are still any IPv4 host.
    expect(publicCoverage(['2001:0:cb00:7100::/64']).ipv4).toBe(ALL_IPV4 - NOT_PUBLIC_IPV4);
    // The client 203.0.113.0/24, inverted in the last 32 bits (~cb007100 = 34ff8eff).
    expect(publicCoverage(['2001:0:cb00:7100:0:0:34ff:8e00/120'])).toEqual({ ipv4: 256n, ipv6: 0n });
  });

  it('counts 6to4 (2002::/16) as the IPv4 addresses it carries', () => {
    expect(publicCoverage(['2002::/16'])).toEqual({ ipv4: ALL_IPV4 - NOT_PUBLIC_IPV4, ipv6: 0n });
    expect(publicCoverage(['2002:cb00:7100::/40'])).toEqual({ ipv4: 256n, ipv6: 0n });
    expect(publicCoverage(['2002:cb00:7107::/48'])).toEqual({ ipv4: 1n, ipv6: 0n });
    expect(publicCoverage(['2002:a00::/24'])).toEqual({ ipv4: 0n, ipv6: 0n });
  });
});

describe('allowedInsideTrusted', () => {
  it('names the allow-list entries that share an address with a trusted range, across spellings', () => {
    expect(allowedInsideTrusted(['10.0.0.0/8'], ['10.1.0.0/16', '192.168.0.0/16'])).toEqual(['10.1.0.0/16']);
    expect(allowedInsideTrusted(['uniquelocal'], ['::ffff:172.16.1.0/120', 'fd12::/16'])).toEqual([
      '::ffff:172.16.1.0/120',
      'fd12::/16',
    ]);
    expect(allowedInsideTrusted(['::ffff:a00:0/104'], ['10.9.9.9'])).toEqual(['10.9.9.9']);
    expect(allowedInsideTrusted(['10.0.4.7', '10.0.4.8'], ['10.0.5.0/24', '::1.2.3.4'])).toEqual([]);
  });
});

describe('wholePrivateBlocks', () => {
  it('names the private blocks a list trusts whole, whatever the spelling', () => {
    expect(wholePrivateBlocks(['uniquelocal'])).toEqual([
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      'fc00::/7',
    ]);
    expect(wholePrivateBlocks(['10.0.0.0/9', '10.128.0.0/9', '192.168.0.0/17'])).toEqual(['10.0.0.0/8']);
    expect(wholePrivateBlocks(['10.0.4.0/24', 'loopback', '192.168.0.0/17'])).toEqual([]);
  });

  it('names fd00::/8, every unique local address in use (fc00::/8 is unassigned), as a whole block too', () => {
    expect(wholePrivateBlocks(['fd00::/8'])).toEqual(['fd00::/8']);
    expect(wholePrivateBlocks(['fd00::/9', 'fd80::/9', '10.0.4.7'])).toEqual(['fd00::/8']);
    expect(wholePrivateBlocks(['fd12:3456:789a::/48'])).toEqual([]);
  });
});
