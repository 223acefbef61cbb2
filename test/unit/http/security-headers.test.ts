import express from 'express';
import request from 'supertest';
import { securityHeaders } from '../../../src/http/security-headers';

describe('security headers (helmet, JSON API profile)', () => {
  const app = express();
  app.use(securityHeaders());
  app.get('/x', (_req, res) => {
    res.json({ ok: true });
  });

  test('every answer forbids running, framing and sniffing its content', async () => {
    const res = await request(app).get('/x').expect(200);
    expect(res.headers['content-security-policy']).toBe("default-src 'none';frame-ancestors 'none'");
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['cross-origin-resource-policy']).toBe('same-origin');
  });

  test("helmet's policies for HTML documents are not sent", async () => {
    const res = await request(app).get('/x').expect(200);
    for (const name of [
      'cross-origin-opener-policy',
      'origin-agent-cluster',
      'x-dns-prefetch-control',
      'x-download-options',
      'x-permitted-cross-domain-policies',
      'x-xss-protection',
    ])
      expect(res.headers[name]).toBeUndefined();
  });
});
