import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hmacSha256Hex } from '../../../src/keys/hash';
import { QuotaWebhook } from '../../../src/usage/internal/quota-webhook';

const SECRET = 'a-long-enough-webhook-key';

async function receiver(answer: (req: IncomingMessage, body: string) => number | 'hang') {
  const hung: (() => void)[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const status = answer(req, body);
      if (status === 'hang') hung.push(() => res.destroy());
      else res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return {
    url,
    close: () => {
      for (const end of hung) end();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      return closed;
    },
  };
}

const until = async (check: () => boolean, ms = 5000) => {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return check();
};

describe('quota webhook', () => {
  test('POSTs the event as JSON with an HMAC signature the receiver can check', async () => {
    const seen: { signature: string; body: string }[] = [];
    const hook = await receiver((req, body) => {
      seen.push({ signature: String(req.headers['x-gateway-signature']), body });
      return 204;
    });
    const results: string[] = [];
    const webhook = new QuotaWebhook({ url: hook.url, secret: SECRET, onResult: (r) => results.push(r) });
    webhook.send({ client: 'shop', threshold: 80 });
    expect(await until(() => results.length === 1)).toBe(true);
    const [{ signature, body }] = seen as [{ signature: string; body: string }];
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(signature) ?? [];
    expect(v1).toBe(hmacSha256Hex(SECRET, `${t}.${body}`));
    expect(JSON.parse(body)).toEqual({ client: 'shop', threshold: 80 });
    expect(signature).not.toContain(SECRET);
    webhook.close();
    await hook.close();
  });

  test('a receiver answering 500 is retried with back-off, then the event is dropped (counted); send never waits', async () => {
    let calls = 0;
    const hook = await receiver(() => {
      calls += 1;
      return 500;
    });
    const results: string[] = [];
    const webhook = new QuotaWebhook({
      url: hook.url,
      secret: SECRET,
      maxAttempts: 3,
      firstRetryMs: 20,
      onResult: (r) => results.push(r),
    });
    const started = performance.now();
    webhook.send({ n: 1 });
    expect(performance.now() - started).toBeLessThan(5);
    expect(await until(() => results.includes('dropped'))).toBe(true);
    expect(calls).toBe(3);
    expect(results).toEqual(['retried', 'retried', 'dropped']);
    webhook.close();
    await hook.close();
  });

  test('a receiver that hangs: calls time out, the bounded queue drops the excess, send still returns at once', async () => {
    const hook = await receiver(() => 'hang');
    const results: string[] = [];
    const webhook = new QuotaWebhook({
      url: hook.url,
      secret: SECRET,
      maxQueue: 2,
      timeoutMs: 100,
      firstRetryMs: 10_000,
      onResult: (r) => results.push(r),
    });
    const started = performance.now();
    for (let i = 0; i < 5; i++) webhook.send({ n: i });
    expect(performance.now() - started).toBeLessThan(20);
    expect(results.filter((r) => r === 'dropped')).toHaveLength(3);
    expect(await until(() => results.includes('retried'))).toBe(true);
    webhook.close();
    expect(results.filter((r) => r === 'dropped')).toHaveLength(5);
    await hook.close();
  });
});
