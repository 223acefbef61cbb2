// The client address every limit, log line and allow-list reads: an IP address without a port, or the socket's.
import { clientAddress } from '../../../src/http/request-context';

describe('clientAddress (issue 42)', () => {
  it('drops the port a load balancer writes into X-Forwarded-For', () => {
    expect(clientAddress('203.0.113.9:41234', '10.0.0.2')).toBe('203.0.113.9');
    expect(clientAddress('[2001:db8::7]:443', '10.0.0.2')).toBe('2001:db8::7');
    expect(clientAddress('[2001:db8::7]', '10.0.0.2')).toBe('2001:db8::7');
  });

  it('keeps a plain address as it is', () => {
    expect(clientAddress('203.0.113.9', '10.0.0.2')).toBe('203.0.113.9');
    expect(clientAddress('2001:db8::7', '10.0.0.2')).toBe('2001:db8::7');
    expect(clientAddress('::ffff:203.0.113.9', '10.0.0.2')).toBe('::ffff:203.0.113.9');
  });

  it("takes the socket's address for anything that is no IP address", () => {
    for (const written of ['unknown', '', '999.1.1.1', '203.0.113.9:1:2', '[nope]:80', 'a b'])
      expect([written, clientAddress(written, '10.0.0.2')]).toEqual([written, '10.0.0.2']);
    expect(clientAddress(undefined, '10.0.0.2')).toBe('10.0.0.2');
  });
});
