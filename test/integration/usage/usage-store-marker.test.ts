// The store's marker (`{prefix}usage:store`) is read from a Redis anyone with access may have written: a marker that is
// not the gateway's (garbage instants, another type of key) never makes `npm run usage` claim a reset, nor fail.
import { Redis } from 'ioredis';
import type { RedisClient } from '../../../src/store/redis-connection';
import { readUsage, usageLedgerStore } from '../../../src/usage';
import { UsageLedger } from '../../../src/usage/internal/usage-ledger';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const DAY = '2026-11-25';
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

/** One replica's real count of the day in the store under `prefix`, and its marker as the ledger writes it. */
async function countedDay(prefix: string): Promise<void> {
  const clock = { now: Date.parse(`${DAY}T10:00:00Z`) };
  const ledger = new UsageLedger({
    store: usageLedgerStore(redis as RedisClient, prefix),
    retentionDays: 400,
    now: () => clock.now,
    replicaId: 'a',
  });
  ledger.record('shop', 'alpha', 'getPlan', 'billable', 7);
  clock.now += 1000;
  await ledger.close();
}

test('a marker with values that are not instants is ignored: no "reset" note, the figures stand', async () => {
  await countedDay('garbage:');
  await redis.hset('garbage:usage:store', 'resetAt', 'zzz-not-a-date', 'since', '<script>');
  const report = await readUsage(usageLedgerStore(redis as RedisClient, 'garbage:'), { from: DAY, to: DAY });
  expect(report.totals[0]?.counts.billable).toBe(7);
  expect(report.missing).toBeUndefined();
  expect(report.store).toEqual({});
});

test('a marker key of another type (WRONGTYPE) is no marker: the report is still printed', async () => {
  await countedDay('typed:');
  await redis.del('typed:usage:store');
  await redis.set('typed:usage:store', 'not a hash');
  const report = await readUsage(usageLedgerStore(redis as RedisClient, 'typed:'), { from: DAY, to: DAY });
  expect(report.totals[0]?.counts.billable).toBe(7);
  expect(report.missing).toBeUndefined();
});
