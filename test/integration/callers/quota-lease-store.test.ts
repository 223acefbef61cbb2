import type { Options } from 'express-rate-limit';
import { Redis } from 'ioredis';
import { MAX_LEASE, QuotaLeaseStore } from '../../../src/callers/quota-lease-store';
import { waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

/** What express-rate-limit hands a store at start: only the window matters to this one. */
const windowOf = (windowMs: number) => ({ windowMs }) as Options;

describe('QuotaLeaseStore against a real Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  let admin: Redis;

  const replica = async (limit: number, windowMs = 60_000, prefix = 'lease-test:') => {
    const redis = new Redis(server.url);
    clients.push(redis);
    await waitFor(() => redis.status === 'ready', { what: 'redis ready' });
    const store = new QuotaLeaseStore({ redis, prefix, limit });
    store.init(windowOf(windowMs));
    return store;
  };
  /** Redis calls of the claim script since the last reset. */
  const claims = async () => {
    const stats = await admin.info('commandstats');
    return Number(/cmdstat_eval:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  };

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
    clients.push(admin);
  });
  beforeEach(async () => {
    await admin.flushall();
    await admin.config('RESETSTAT');
  });
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await server.stop();
  });

  test('a busy client far from its limit costs one Redis call per lease, not per request', async () => {
    const store = await replica(1_000_000);
    const hits: number[] = [];
    for (let i = 0; i < 1_000; i += 1) hits.push((await store.increment('busy')).totalHits);
    expect(hits).toEqual(Array.from({ length: 1_000 }, (_, i) => i + 1));
    // One claim of 1 to learn the window, then leases of MAX_LEASE.
    expect(await claims()).toBeLessThanOrEqual(1 + Math.ceil(999 / MAX_LEASE));
    const counter = Number(await admin.get('lease-test:busy'));
    expect(counter).toBeGreaterThanOrEqual(1_000);
    expect(counter).toBeLessThan(1_000 + MAX_LEASE);
  });

  test('two replicas hand out every hit number once and admit exactly the limit between them', async () => {
    const limit = 500;
    const a = await replica(limit);
    const b = await replica(limit);
    const admitted: number[] = [];
    let refused = 0;
    // Concurrent bursts on both replicas, as a fleet behind a load balancer sees them.
    for (let burst = 0; burst < 40; burst += 1) {
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) => ((i + burst) % 2 === 0 ? a : b).increment('shared')),
      );
      for (const { totalHits } of results) {
        if (totalHits <= limit) admitted.push(totalHits);
        else refused += 1;
      }
    }
    expect(admitted).toHaveLength(limit);
    expect(new Set(admitted).size).toBe(limit);
    expect(refused).toBe(40 * 30 - limit);
  });

  test('a small limit is counted hit by hit, and refusals once it is reached cost no Redis call', async () => {
    const store = await replica(10);
    const hits: number[] = [];
    for (let i = 0; i < 10; i += 1) hits.push((await store.increment('small')).totalHits);
    expect(hits).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await admin.get('lease-test:small')).toBe('10');
    const callsAtLimit = await claims();
    expect(callsAtLimit).toBe(10);

    const over = await store.increment('small');
    expect(over.totalHits).toBeGreaterThan(10);
    for (let i = 0; i < 20; i += 1) await store.increment('small');
    expect(await claims()).toBe(callsAtLimit);
  });

  test('concurrent requests on an empty lease wait for one claim together and each get their own hit', async () => {
    const store = await replica(1_000_000);
    const results = await Promise.all(Array.from({ length: 50 }, () => store.increment('burst')));
    const hits = results.map((r) => r.totalHits).sort((x, y) => x - y);
    expect(hits).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(await claims()).toBeLessThanOrEqual(3);
  });

  test('the window is fixed in Redis: it ends for every replica at once, and counting starts again', async () => {
    const a = await replica(3, 1_000);
    const b = await replica(3, 1_000);
    const first = await a.increment('window');
    expect(first.resetTime!.getTime() - Date.now()).toBeGreaterThan(800);
    expect(first.resetTime!.getTime() - Date.now()).toBeLessThanOrEqual(1_000);
    await b.increment('window');
    await a.increment('window');
    expect((await b.increment('window')).totalHits).toBe(4);
    expect((await a.increment('window')).totalHits).toBe(4);

    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect((await b.increment('window')).totalHits).toBe(1);
    expect((await a.increment('window')).totalHits).toBe(2);
  });

  test('resetKey clears the shared counter and the lease', async () => {
    const store = await replica(2);
    await store.increment('reset');
    await store.increment('reset');
    expect((await store.increment('reset')).totalHits).toBe(3);
    await store.resetKey('reset');
    expect(await admin.exists('lease-test:reset')).toBe(0);
    expect((await store.increment('reset')).totalHits).toBe(1);
  });

  test('a failed claim rejects (the caller falls back) and leaves the store usable', async () => {
    const store = await replica(100);
    await store.increment('outage');
    const redis = clients[clients.length - 1] as Redis;
    redis.disconnect();
    await expect(store.increment('outage')).rejects.toThrow();
    redis.connect().catch(() => undefined);
    await waitFor(() => redis.status === 'ready', { what: 'reconnect' });
    expect((await store.increment('outage')).totalHits).toBeGreaterThan(1);
  });
});
