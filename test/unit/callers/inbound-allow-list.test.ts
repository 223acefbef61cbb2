import request from 'supertest';
import { inboundAllowList as allowList, cidrList, inList } from '../../../src/callers/inbound-allow-list';
import { createAuthFailureLog } from '../../../src/observability/auth-failure-log';
import { memoryLogger, testApp } from './support/test-app';

const inboundAllowList = (cidrs: string[]) =>
  allowList(cidrs, createAuthFailureLog({ logger: memoryLogger() }));

describe('inbound CIDR allow-list', () => {
  const list = cidrList(['10.0.0.0/8', '192.168.1.7', '2001:db8::/32', '::1']);

  test.each([
    ['10.1.2.3', true],
    ['11.0.0.1', false],
    ['192.168.1.7', true],
    ['192.168.1.8', false],
    ['::ffff:10.9.9.9', true],
    ['::ffff:11.9.9.9', false],
    ['2001:db8::42', true],
    ['2001:db9::1', false],
    ['::1', true],
  ])('%s allowed: %s', (ip, expected) => {
    expect(inList(list, ip)).toBe(expected);
  });

  test('a caller outside the list gets 403 CLIENT_FORBIDDEN', async () => {
    const app = testApp(inboundAllowList(['10.0.0.0/8']));
    const res = await request(app).get('/x').expect(403);
    expect(res.body.status.description).toBe('CLIENT_FORBIDDEN');
  });

  test('loopback callers pass when loopback is listed (IPv4 and IPv6 forms)', async () => {
    await request(testApp(inboundAllowList(['127.0.0.0/8', '::1/128'])))
      .get('/x')
      .expect(200);
  });

  test('an empty list lets everyone in', async () => {
    await request(testApp(inboundAllowList([])))
      .get('/x')
      .expect(200);
  });

  test('X-Forwarded-For is honoured only through the trust proxy setting', async () => {
    const trusting = testApp(inboundAllowList(['10.0.0.0/8']));
    trusting.set('trust proxy', 'loopback');
    await request(trusting).get('/x').set('X-Forwarded-For', '10.2.3.4').expect(200);
    const untrusting = testApp(inboundAllowList(['10.0.0.0/8']));
    untrusting.set('trust proxy', false);
    await request(untrusting).get('/x').set('X-Forwarded-For', '10.2.3.4').expect(403);
  });
});
