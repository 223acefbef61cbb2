// sendAnswer writes only the answer-header allow-list, whatever a (cached, possibly forged) answer carries.
import express from 'express';
import request from 'supertest';
import { sendAnswer, type UpstreamAnswer } from '../../../src/forwarding/internal/forwarder';

describe('sendAnswer', () => {
  it('drops caching, cookie and unknown headers an answer record carries, keeping the allow-list', async () => {
    const forged: UpstreamAnswer = {
      status: 200,
      headers: {
        'content-type': 'application/json',
        'content-language': 'es',
        'retry-after': '3',
        'cache-control': 'public, max-age=86400',
        expires: 'Thu, 01 Jan 2099 00:00:00 GMT',
        'last-modified': 'Wed, 21 Oct 2026 07:28:00 GMT',
        etag: '"forged"',
        'set-cookie': 'session=forged',
        location: 'https://evil.example',
      },
      body: Buffer.from('{"ok":true}'),
    };
    const app = express();
    app.get('/', (_req, res) => {
      res.setHeader('cache-control', 'no-store');
      sendAnswer(res, forged);
    });
    const res = await request(app).get('/');
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"ok":true}');
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['content-language']).toBe('es');
    expect(res.headers['retry-after']).toBe('3');
    expect(res.headers['cache-control']).toBe('no-store');
    for (const name of ['expires', 'last-modified', 'etag', 'set-cookie', 'location']) {
      expect(res.headers[name]).toBeUndefined();
    }
  });
});
