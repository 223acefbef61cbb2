import request from 'supertest';
import { authFailureLimit } from '../../../src/callers/auth-failure-limit';
import { authenticate } from '../../../src/callers/authenticate';
import { createAuthFailureLog } from '../../../src/observability/auth-failure-log';
import { createMetrics } from '../../../src/observability/metrics';
import { memoryLogger, testApp } from './support/test-app';

/** A replica without Redis (local mode): failures counted in its memory. Behind one trusted proxy hop. */
function replica(limit: number) {
  const logger = memoryLogger();
  const metrics = createMetrics();
  const app = testApp(
    authenticate({
      registry: { findById: () => undefined, findByApiKey: () => undefined },
      failures: authFailureLimit({
        keyPrefix: 'unit:',
        limit,
        windowSeconds: 60,
        metrics,
        logger,
        failureLog: createAuthFailureLog({ logger }),
      }),
    }),
  );
  app.set('trust proxy', 1);
  const from = (ip: string) => request(app).get('/x').set('X-Forwarded-For', ip).set('X-API-Key', 'wrong');
  return { from, metrics };
}

describe('failed authentications without Redis', () => {
  test('counted in replica memory: 401 up to the limit, then 429 counted with its reason', async () => {
    const { from, metrics } = replica(3);
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await from('192.0.2.10')).status);
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect((await from('192.0.2.11')).status).toBe(401); // its neighbour is not blocked
    const counted = (await metrics.rateLimitRejections.get()).values;
    expect(counted).toEqual([
      expect.objectContaining({ labels: { client: 'anonymous', reason: 'auth-failures' }, value: 2 }),
    ]);
  });

  test('IPv6 counts per /56: rotating addresses inside one network does not escape the block', async () => {
    const { from } = replica(3);
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await from(`2001:db8:0:${i}::${i + 1}`)).status);
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect((await from('2001:db8:0:ff::1')).status).toBe(429); // same /56
    expect((await from('2001:db8:1::1')).status).toBe(401); // another /56
    // IPv4-mapped addresses count as their IPv4 address.
    for (let i = 0; i < 3; i++) await from('::ffff:198.51.100.4');
    expect((await from('198.51.100.4')).status).toBe(429);
  });

  test('an IPv4 caller carried in an IPv6 address (NAT64, 6to4, Teredo) counts as the IPv4 address it carries', async () => {
    const { from } = replica(3);
    // NAT64 (64:ff9b::/96): every IPv4 caller behind the translator shares one /56; 198.51.100.7 is one caller.
    for (let i = 0; i < 3; i++) await from('64:ff9b::c633:6407');
    expect((await from('64:ff9b::198.51.100.7')).status).toBe(429);
    expect((await from('198.51.100.7')).status).toBe(429);
    expect((await from('64:ff9b::c633:6408')).status).toBe(401); // 198.51.100.8, another caller
    // 6to4 (2002:AABB:CCDD::/48 is the IPv4 host AA.BB.CC.DD): the site's 256 /56s are one caller.
    for (let i = 0; i < 3; i++) await from(`2002:c633:6409:${i}00::1`);
    expect((await from('2002:c633:6409:ff00::1')).status).toBe(429);
    // Teredo (the client's IPv4 inverted in the last 32 bits): two clients of one Teredo server are two callers.
    for (let i = 0; i < 3; i++) await from('2001:0:4136:e378:8000:63bf:39cc:9bf5'); // 198.51.100.10
    expect((await from('198.51.100.10')).status).toBe(429);
    expect((await from('2001:0:4136:e378:8000:63bf:39cc:9bf4')).status).toBe(401); // 198.51.100.11
  });
});
