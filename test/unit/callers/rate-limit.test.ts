import type { RequestHandler } from 'express';
import request from 'supertest';
import type { Caller } from '../../../src/callers/caller';
import { rateLimit } from '../../../src/callers/rate-limit';
import { createMetrics } from '../../../src/observability/metrics';
import { memoryLogger, testApp } from './support/test-app';

/** Stands in for authenticate: the caller named by the X-Client header, with an optional limit. */
function fakeCaller(limits: Record<string, { limit: number; windowSeconds: number }>): RequestHandler {
  return (req, _res, next) => {
    const id = String(req.headers['x-client'] ?? 'anonymous');
    const caller: Caller = { id, scopes: new Set(), via: 'api-key', rateLimit: limits[id], origins: [] };
    req.caller = caller;
    next();
  };
}

describe('rate limit in replica memory (no Redis configured)', () => {
  const metrics = createMetrics();
  const app = testApp(
    fakeCaller({ tiny: { limit: 2, windowSeconds: 30 } }),
    rateLimit({
      keyPrefix: 'bff:',
      defaultLimit: { limit: 3, windowSeconds: 60 },
      metrics,
      logger: memoryLogger(),
    }),
  );

  test('answers carry RateLimit and RateLimit-Policy headers', async () => {
    const res = await request(app).get('/x').set('X-Client', 'headers').expect(200);
    expect(res.headers['ratelimit-policy']).toBe('3;w=60');
    expect(res.headers.ratelimit).toMatch(/^limit=3, remaining=2, reset=\d+$/);
  });

  test('the default limit applies per client, and the 429 is the RATE_LIMITED envelope with Retry-After', async () => {
    for (let i = 0; i < 3; i += 1) await request(app).get('/x').set('X-Client', 'default-client').expect(200);
    const res = await request(app).get('/x').set('X-Client', 'default-client').expect(429);
    expect(res.body).toEqual({
      status: { code: '429', description: 'RATE_LIMITED', detail: expect.stringContaining('default-client') },
      requestId: res.headers['x-request-id'],
    });
    const retryAfter = Number(res.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(res.headers.ratelimit).toMatch(/remaining=0,/);
    // Another client has its own budget.
    await request(app).get('/x').set('X-Client', 'someone-else').expect(200);
  });

  test('a per-client limit and window from the registry replace the default', async () => {
    await request(app).get('/x').set('X-Client', 'tiny').expect(200);
    const second = await request(app).get('/x').set('X-Client', 'tiny').expect(200);
    expect(second.headers['ratelimit-policy']).toBe('2;w=30');
    const refused = await request(app).get('/x').set('X-Client', 'tiny').expect(429);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(30);
  });

  test('rejections are counted per client', async () => {
    const counted = await metrics.rateLimitRejections.get();
    const byClient = Object.fromEntries(counted.values.map((v) => [v.labels.client, v.value]));
    expect(byClient['default-client']).toBe(1);
    expect(byClient.tiny).toBe(1);
  });
});
