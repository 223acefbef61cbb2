// The Redis-health owner: the only writer of token_store_healthy and of the Redis down/up lines.
import { EventEmitter } from 'node:events';
import { createMetrics } from '../../../src/observability/metrics';
import type { RedisClient } from '../../../src/store/redis-connection';
import { createRedisHealth } from '../../../src/store/redis-health';
import { captureLogger } from '../tokens/token-fakes';

function fakeRedis(status: string): RedisClient & EventEmitter {
  return Object.assign(new EventEmitter(), { status }) as unknown as RedisClient & EventEmitter;
}

async function gauge(metrics: ReturnType<typeof createMetrics>): Promise<number | undefined> {
  return (await metrics.registry.getSingleMetric('token_store_healthy')?.get())?.values[0]?.value;
}

function setUp(status = 'ready') {
  const redis = fakeRedis(status);
  const { logger, lines } = captureLogger();
  const metrics = createMetrics();
  const health = createRedisHealth(redis, logger, metrics);
  const count = (text: string) =>
    lines()
      .split('\n')
      .filter((l) => l.includes(text)).length;
  return { redis, health, metrics, count };
}

describe('createRedisHealth', () => {
  test('starts from the connection state and follows it, logging a flapping outage once', async () => {
    const { redis, health, metrics, count } = setUp('connecting');
    expect(health.healthy()).toBe(false);
    expect(await gauge(metrics)).toBe(0);
    redis.emit('ready');
    expect(health.healthy()).toBe(true);
    expect(await gauge(metrics)).toBe(1);
    for (let i = 0; i < 5; i++) redis.emit('error', new Error('ECONNREFUSED'));
    redis.emit('close');
    expect(health.healthy()).toBe(false);
    expect(await gauge(metrics)).toBe(0);
    expect(count('redis unreachable: serving from memory, reconnecting')).toBe(1);
    redis.emit('ready');
    expect(await gauge(metrics)).toBe(1);
    expect(count('redis reachable again')).toBe(1);
  });

  test('a closed connection (a quit at shutdown) is down without a log line', async () => {
    const { redis, health, metrics, count } = setUp();
    redis.emit('close');
    expect(health.healthy()).toBe(false);
    expect(await gauge(metrics)).toBe(0);
    expect(count('redis')).toBe(0);
  });

  test('a hung Redis (connection ready, calls failing) is down once its users report it, naming the first, up on a success', async () => {
    const { health, metrics, count } = setUp();
    health.reportFailure(new Error('Command timed out'), 'rate limiter');
    health.reportFailure(new Error('Command timed out'), 'token cache');
    expect(health.healthy()).toBe(false);
    expect(await gauge(metrics)).toBe(0);
    expect(count('Command timed out')).toBe(1);
    expect(count('"noticedBy":"rate limiter"')).toBe(1);
    expect(count('token cache')).toBe(0);
    health.reportSuccess();
    health.reportSuccess();
    expect(await gauge(metrics)).toBe(1);
    expect(count('redis reachable again')).toBe(1);
  });

  test('a Redis unreachable at start-up is one outage: one down line for the start and the errors after, one up line', async () => {
    const { redis, health, metrics, count } = setUp('connecting');
    expect(await health.waitAtStart(1)).toBe(false);
    expect(await gauge(metrics)).toBe(0);
    redis.emit('error', new Error('ECONNREFUSED'));
    redis.emit('error', new Error('ECONNREFUSED'));
    expect(count('redis not reachable at start: starting degraded')).toBe(1);
    expect(count('redis unreachable')).toBe(0);
    redis.emit('ready');
    expect(count('redis reachable again')).toBe(1);
    expect(await gauge(metrics)).toBe(1);
  });

  test('a Redis that becomes ready during the start-up wait starts healthy, without a line', async () => {
    const { redis, health, metrics, count } = setUp('connecting');
    const waiting = health.waitAtStart(60_000);
    redis.emit('ready');
    expect(await waiting).toBe(true);
    expect(await gauge(metrics)).toBe(1);
    expect(count('redis')).toBe(0);
  });

  test('without Redis the store is memory: always healthy, whatever is reported', async () => {
    const { logger, lines } = captureLogger();
    const metrics = createMetrics();
    const health = createRedisHealth(undefined, logger, metrics);
    health.reportFailure(new Error('impossible'));
    expect(await health.waitAtStart(60_000)).toBe(true);
    expect(health.healthy()).toBe(true);
    expect(await gauge(metrics)).toBe(1);
    expect(lines()).toBe('');
  });
});
