// A caller that hangs up while its provider call is out: the call goes on (it is detached from the caller), the
// provider answers and bills it, the quota commits its unit, and the ledger must count it too. The real gateway,
// real Redis, the simulator slowed down so that every caller leaves before the provider answers.
import { randomBytes, randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { Redis } from 'ioredis';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import type { RedisClient } from '../../../src/store/redis-connection';
import { readUsage, usageLedgerStore } from '../../../src/usage';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

jest.setTimeout(60_000);

const KEY = `pbk_leaver-${randomBytes(12).toString('hex')}`;
const PREFIX = `leaver-${Date.now()}:`;
const LATENCY_MS = 600;

describe('a caller who hangs up while the provider call is out', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateway: TestGateway;

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0, username: 'leaver-merchant', password: 'leaver-password' }),
    ]);
    gateway = await startTestGateway({
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: 'leaver-merchant',
      UPSTREAM_PASSWORD: 'leaver-password',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: PREFIX,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CLIENTS_FILE: writeClientsFile([
        { id: 'leaver', keys: [KEY], scopes: ['plans:read', 'documents:validate'], quota: { day: 100 } },
      ]),
    });
  });

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  /** Sends the request and hangs up (the socket destroyed) before the provider can answer. */
  const leaveEarly = (path: string, body?: string) =>
    new Promise<void>((resolve) => {
      const headers: Record<string, string> = { 'x-api-key': KEY };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const req = request(`${gateway.url}${path}`, { method: body === undefined ? 'GET' : 'POST', headers });
      req.on('error', () => resolve());
      req.on('response', () => {
        throw new Error('answered before the caller left');
      });
      req.end(body);
      setTimeout(() => req.destroy(), LATENCY_MS / 3);
    });

  test('the ledger counts the call the provider answered and billed', async () => {
    // A token first, so that every call below reaches the provider while its caller is still there.
    const warm = await fetch(`${gateway.url}/api/subscriptions/plan/${randomUUID()}`, {
      headers: { 'x-api-key': KEY },
    });
    expect(warm.status).toBe(404);
    simulator.setFaults({ latencyMs: LATENCY_MS });
    await leaveEarly(`/api/subscriptions/plan/${randomUUID()}`);
    await leaveEarly(`/api/subscriptions/plan/${randomUUID()}`);
    await leaveEarly(
      '/api/validation/document',
      JSON.stringify({ country: 'BRA', document: { id: '52998224725', type: 'CPF' } }),
    );
    // The provider answers every call after its caller left (and bills it: a 404 or a 200).
    for (let i = 0; i < 100 && simulator.answers().length < 4; i++)
      await new Promise((r) => setTimeout(r, 50));
    const answers = simulator.answers();
    expect(answers.map((a) => a.status).sort()).toEqual([200, 404, 404, 404]);
    await new Promise((r) => setTimeout(r, 100));

    await gateway.close();
    const client = new Redis(redis.url);
    try {
      const today = new Date().toISOString().slice(0, 10);
      const report = await readUsage(usageLedgerStore(client as unknown as RedisClient, PREFIX), {
        from: today,
        to: today,
      });
      expect(report.totals).toEqual([
        { client: 'leaver', account: 'default', counts: { billable: 4, answers2xx: 1, answers4xx: 3 } },
      ]);
    } finally {
      client.disconnect();
    }
  });
});
