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
});
