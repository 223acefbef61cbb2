// The quota claim script on a real redis-server: grants under the limit, and the replicas of a client and account
// (who claimed within the window) counted in the same script, for an outage's share.
import { Redis } from 'ioredis';
import type { RedisClient } from '../../../src/store/redis-connection';
import { redisQuotaCounters } from '../../../src/usage/internal/quota-counters';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  redis = new Redis(server.url);
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

test('claims count the replicas that claimed within the window and forget the quiet ones', async () => {
  const counters = redisQuotaCounters(redis as unknown as RedisClient);
  const claim = {
    key: '{quota:app:a}:day:UTC:2026-11-25',
    want: 4,
    limit: 10,
    unsynced: 0,
    expireAt: Date.now() + 60_000,
  };
  const seen = (replicaId: string, now: number) => ({
    key: '{quota:app:a}:replicas',
    replicaId,
    now,
    windowMs: 1_000,
  });
  const now = Date.now();
  expect(await counters.claim([claim], seen('r1', now))).toEqual([{ granted: 4, total: 4, replicas: 1 }]);
  expect(await counters.claim([claim], seen('r2', now + 10))).toEqual([
    { granted: 4, total: 8, replicas: 2 },
  ]);
  // r1 and r2 went quiet more than the window ago: only r3 counts, and they are forgotten.
  expect(await counters.claim([claim], seen('r3', now + 5_000))).toEqual([
    { granted: 2, total: 10, replicas: 1 },
  ]);
  expect(await redis.hkeys('{quota:app:a}:replicas')).toEqual(['r3']);
  expect(await redis.pttl('{quota:app:a}:replicas')).toBeGreaterThan(0);
  // Without a claiming replica: the grant alone (the CLI, tests).
  expect(await counters.claim([{ ...claim, key: '{quota:app:a}:month:UTC:2026-11' }])).toEqual([
    { granted: 4, total: 4 },
  ]);
});

test('units given back to a counter Redis no longer holds (restart, eviction) leave no key and grant nothing extra', async () => {
  const counters = redisQuotaCounters(redis as unknown as RedisClient);
  const claim = {
    key: '{quota:app:lost}:day:UTC:2026-11-25',
    want: 4,
    limit: 10,
    unsynced: 0,
    expireAt: Date.now() + 60_000,
  };
  expect(await counters.claim([claim])).toEqual([{ granted: 4, total: 4 }]);
  await redis.del(claim.key); // Redis lost the counter (a restart without persistence, an eviction)
  await counters.giveBack([{ key: claim.key, units: 4 }]); // a graceful stop gives the unspent units back
  // No counter without expiry, below zero, that would live forever and grant beyond the limit.
  expect(await redis.exists(claim.key)).toBe(0);
  expect(await counters.claim([{ ...claim, want: 10 }])).toEqual([{ granted: 10, total: 10 }]);
  expect(await redis.pttl(claim.key)).toBeGreaterThan(0);
  expect(await counters.claim([claim])).toEqual([{ granted: 0, total: 10 }]);
});

test('a counter lost mid-period restarts from the floor; one spoiled by a non-number (or another type) too, never from 0', async () => {
  const counters = redisQuotaCounters(redis as unknown as RedisClient);
  const claim = {
    key: '{quota:app:spoiled}:month:UTC:2026-11',
    want: 20,
    limit: 60,
    unsynced: 0,
    expireAt: Date.now() + 60_000,
    floor: 50, // this replica knows the fleet had used 50 units this period
  };
  // Missing: restored from the floor, only what is left under the limit granted, and said.
  expect(await counters.claim([claim])).toEqual([{ granted: 10, total: 60, lost: true }]);
  // Spoiled: a string that is no number, then a key of another type where the counter was.
  await redis.set(claim.key, 'not-a-number');
  expect(await counters.claim([claim])).toEqual([{ granted: 10, total: 60, lost: true }]);
  await redis.del(claim.key);
  await redis.hset(claim.key, 'x', '1');
  expect(await counters.claim([claim])).toEqual([{ granted: 10, total: 60, lost: true }]);
  expect(await redis.pttl(claim.key)).toBeGreaterThan(0);
});
