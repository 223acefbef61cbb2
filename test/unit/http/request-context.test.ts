// The client address every limit, log line and allow-list reads: an IP address without a port, or the socket's.
import express from 'express';
import request from 'supertest';
import { clientAddress, rememberClientIp } from '../../../src/http/request-context';

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

describe('req.ip behind trusted proxies that write ports (adv-42)', () => {
  /** An app behind proxies on loopback, answering the caller address it reads. */
  function app() {
    const gateway = express();
    gateway.set('trust proxy', ['loopback']);
    rememberClientIp(gateway);
    gateway.get('/ip', (req, res) => {
      res.json({ ip: req.ip });
    });
    return (forwardedFor: string) =>
      request(gateway)
        .get('/ip')
        .set('X-Forwarded-For', forwardedFor)
        .then((res) => (res.body as { ip: string }).ip);
  }

  it('walks past a trusted proxy written with a port: the caller is the one before it, not the proxy', async () => {
    const ipOf = app();
    // An outer proxy at 127.0.0.9, written with its port by the inner one: before, every caller was 127.0.0.9.
    expect(await ipOf('203.0.113.5, 127.0.0.9:4444')).toBe('203.0.113.5');
    expect(await ipOf('203.0.113.6:1111, [::1]:4444')).toBe('203.0.113.6');
  });

  it('still stops at the first address that is no proxy, port or not', async () => {
    const ipOf = app();
    expect(await ipOf('10.9.9.9, 198.51.100.1:5555, 127.0.0.9:4444')).toBe('198.51.100.1');
    expect(await ipOf('127.0.0.5, 198.51.100.2')).toBe('198.51.100.2');
  });
});
