import express from 'express';
import request from 'supertest';
import { apiHelmet, SECURITY_HEADERS, securityHeaders } from '../../../src/http/security-headers';

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

  test('the headers taken once are exactly those helmet itself sets on an answer, in its order', async () => {
    const withHelmet = express();
    withHelmet.disable('x-powered-by');
    withHelmet.use(apiHelmet());
    withHelmet.get('/x', (_req, res) => {
      res.json({ ok: true });
    });
    const fromHelmet = await request(withHelmet).get('/x').expect(200);
    const ours = await request(app).get('/x').expect(200);
    const names = SECURITY_HEADERS.map(([name]) => name);
    expect(names.length).toBeGreaterThanOrEqual(6);
    const securityPart = (headers: Record<string, string>) =>
      Object.keys(headers).filter(
        (name) =>
          !['date', 'content-length', 'etag', 'connection', 'keep-alive', 'content-type'].includes(name),
      );
    expect(securityPart(fromHelmet.headers as Record<string, string>)).toEqual(names);
    expect(securityPart(ours.headers as Record<string, string>)).toEqual(names);
    for (const [name, value] of SECURITY_HEADERS) {
      expect(ours.headers[name]).toBe(value);
      expect(fromHelmet.headers[name]).toBe(value);
    }
  });

  test('an X-Powered-By set before it is dropped, as helmet drops it', async () => {
    const loud = express();
    loud.use((_req, res, next) => {
      res.setHeader('x-powered-by', 'Express');
      next();
    });
    loud.use(securityHeaders());
    loud.get('/x', (_req, res) => {
      res.json({ ok: true });
    });
    const res = await request(loud).get('/x').expect(200);
    expect(res.headers['x-powered-by']).toBeUndefined();
  });
});
