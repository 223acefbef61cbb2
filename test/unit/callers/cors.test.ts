import request from 'supertest';
import { cors } from '../../../src/callers/cors';
import { testApp } from './support/test-app';

const APP = 'https://checkout.internal.example';
const FOREIGN = 'https://evil.example';

describe('CORS', () => {
  let registryOrigins = new Set<string>(['https://partner.internal.example']);
  const app = testApp(cors({ origins: [APP], registry: { allOrigins: () => registryOrigins } }));

  test('a preflight from an allowed origin is answered 204 with the allowed methods and headers', async () => {
    const res = await request(app)
      .options('/api/subscriptions/plan/x')
      .set('Origin', APP)
      .set('Access-Control-Request-Method', 'GET')
      .set('Access-Control-Request-Headers', 'authorization, x-request-id')
      .expect(204);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers['access-control-allow-methods']).toBe('GET, POST');
    expect(res.headers['access-control-allow-headers']).toBe(
      'content-type, authorization, x-api-key, x-request-id, x-upstream-account, idempotency-key',
    );
    expect(Number(res.headers['access-control-max-age'])).toBeGreaterThan(0);
    expect(res.headers.vary).toContain('Origin');
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  });

  test('an actual request from an allowed origin gets its origin echoed and the exposed headers', async () => {
    const res = await request(app).get('/x').set('Origin', APP).expect(200);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers['access-control-expose-headers']).toBe(
      'X-Request-Id, RateLimit, RateLimit-Policy, Retry-After, X-Upstream-Account, Idempotent-Replayed',
    );
    expect(res.headers.vary).toBe('Origin');
  });

  test('a foreign origin gets no CORS headers, and its preflight is refused', async () => {
    const actual = await request(app).get('/x').set('Origin', FOREIGN).expect(200);
    expect(actual.headers['access-control-allow-origin']).toBeUndefined();
    expect(actual.headers['access-control-expose-headers']).toBeUndefined();
    const preflight = await request(app)
      .options('/x')
      .set('Origin', FOREIGN)
      .set('Access-Control-Request-Method', 'GET')
      .expect(403);
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(preflight.body.status.description).toBe('CLIENT_FORBIDDEN');
  });

  test('origins from the registry are allowed, and a reload is picked up', async () => {
    const partner = 'https://partner.internal.example';
    expect((await request(app).get('/x').set('Origin', partner)).headers['access-control-allow-origin']).toBe(
      partner,
    );
    registryOrigins = new Set(['https://new.internal.example']);
    expect(
      (await request(app).get('/x').set('Origin', partner)).headers['access-control-allow-origin'],
    ).toBeUndefined();
    const added = await request(app).get('/x').set('Origin', 'https://new.internal.example');
    expect(added.headers['access-control-allow-origin']).toBe('https://new.internal.example');
  });

  test('requests without an Origin pass untouched', async () => {
    const res = await request(app).get('/x').expect(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});
