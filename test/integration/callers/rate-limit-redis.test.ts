import type { RequestHandler } from 'express';
import request from 'supertest';
import type { Caller } from '../../../src/callers/caller';
import { rateLimit } from '../../../src/callers/rate-limit';
import { createMetrics } from '../../../src/observability/metrics';
import { createRedisClient, type RedisClient } from '../../../src/store/redis-connection';
import { createRedisHealth } from '../../../src/store/redis-health';
import { waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { memoryLogger, testApp } from '../../unit/callers/support/test-app';
import { captureLogger } from '../../unit/tokens/token-fakes';

const caller = (id: string, limit?: { limit: number; windowSeconds: number }): RequestHandler => {
  return (req, _res, next) => {
    req.caller = { id, scopes: new Set(), via: 'api-key', rateLimit: limit, origins: [] } satisfies Caller;
    next();
  };
};

function replica(redis: RedisClient, id: string, limit = { limit: 10, windowSeconds: 60 }) {
  const metrics = createMetrics();
  const logger = memoryLogger();
  // The Redis-health owner, as the gateway wires it: it alone logs an outage.
  const healthLog = captureLogger();
  const app = testApp(
    caller(id, limit),
    rateLimit({
      redis,
      keyPrefix: 'bff-test:',
      defaultLimit: { limit: 600, windowSeconds: 60 },
      metrics,
      logger,
      health: createRedisHealth(redis, healthLog.logger, metrics),
    }),
  );
  const fallbacks = async () => (await metrics.rateLimitFallbacks.get()).values[0]?.value ?? 0;
  /** The health owner's lines holding `text`. */
  const healthLines = (text: string) =>
    healthLog
      .lines()
      .split('\n')
      .filter((line) => line.includes(text));
  return { app, metrics, logger, fallbacks, healthLines };
}

const connect = (url: string) =>
  createRedisClient({
    topology: { kind: 'standalone', url },
    tls: false,
    keyPrefix: 'bff-test:',
    allowMemoryStore: false,
  })!;

describe('rate limits shared through a real Redis', () => {
  let server: RedisServer;
  const clients: RedisClient[] = [];
  const newClient = async () => {
    const client = connect(server.url);
    clients.push(client);
    await waitFor(() => client.status === 'ready', { what: 'redis ready' });
    return client;
  };

  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await server.stop();
  });

  test('a 10/min limit is shared by two replicas: 16 requests spread over both -> 6 refused', async () => {
    const a = replica(await newClient(), 'shared-client');
    const b = replica(await newClient(), 'shared-client');
    const statuses: number[] = [];
    for (let i = 0; i < 16; i += 1)
      statuses.push((await request(i % 2 === 0 ? a.app : b.app).get('/x')).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
    expect(statuses.slice(0, 10).every((s) => s === 200)).toBe(true);
    expect(await a.fallbacks()).toBe(0);
    expect(a.logger.lines.filter((l) => l.level !== 'info')).toEqual([]);
  });

  test('headers and the 429 envelope come from the shared counter', async () => {
    const a = replica(await newClient(), 'headers-client', { limit: 2, windowSeconds: 30 });
    const first = await request(a.app).get('/x').expect(200);
    expect(first.headers['ratelimit-policy']).toBe('2;w=30');
    expect(first.headers.ratelimit).toMatch(/^limit=2, remaining=1, reset=(30|29)$/);
    await request(a.app).get('/x').expect(200);
    const refused = await request(a.app).get('/x').expect(429);
    expect(refused.body.status).toEqual({
      code: '429',
      description: 'RATE_LIMITED',
      detail: expect.stringContaining('"headers-client" exceeded its limit of 2 requests per 30 s'),
    });
    expect(refused.body.requestId).toBe(refused.headers['x-request-id']);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(29);
    const keys = await clients[0]!.keys('bff-test:rl:*');
    expect(keys).toEqual(
      expect.arrayContaining(['bff-test:rl:30:headers-client', 'bff-test:rl:60:shared-client']),
    );
  });

  test('Redis killed: answers keep coming from memory (no 500), counted, and logged once by the health owner alone; back when it returns', async () => {
    const a = replica(await newClient(), 'outage-client', { limit: 1000, windowSeconds: 60 });
    await request(a.app).get('/x').expect(200);
    await server.kill();
    const statuses: number[] = [];
    for (let i = 0; i < 20; i += 1) statuses.push((await request(a.app).get('/x')).status);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(await a.fallbacks()).toBe(20);
    expect(a.logger.lines).toEqual([]);
    // The owner hears of it from the connection (its first failed reconnect) or a limiter's failed call.
    await waitFor(() => a.healthLines('"level":40').length > 0, { what: 'the down line' });
    expect(a.healthLines('"level":40')).toEqual([
      expect.stringContaining('redis unreachable: serving from memory, reconnecting'),
    ]);

    await server.restart();
    await waitFor(() => clients.every((c) => c.status === 'ready'), { what: 'reconnect', timeoutMs: 15_000 });
    await waitFor(
      async () => (await request(a.app).get('/x')).headers.ratelimit?.includes('remaining=999,') === true,
      {
        what: 'shared counting again',
        timeoutMs: 5_000,
        intervalMs: 200,
      },
    );
    expect(a.healthLines('redis reachable again')).toHaveLength(1);
    expect(a.logger.lines).toEqual([]);
  });

  test('a limiter that started while Redis was down uses Redis once it is up', async () => {
    await server.kill();
    const client = connect(server.url);
    clients.push(client);
    const a = replica(client, 'late-client', { limit: 5, windowSeconds: 60 });
    await request(a.app).get('/x').expect(200);
    expect(await a.fallbacks()).toBe(1);
    await server.restart();
    await waitFor(() => client.status === 'ready', { what: 'reconnect', timeoutMs: 15_000 });
    await new Promise((r) => setTimeout(r, 1_100)); // past the retry pause after the failure
    await request(a.app).get('/x').expect(200);
    await waitFor(async () => (await client.get('bff-test:rl:60:late-client')) !== null, {
      what: 'counter in Redis',
    });
  });
});
