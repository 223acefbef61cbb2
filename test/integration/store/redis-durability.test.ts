// The durability read against real redis-servers: the shipped settings, the test support's volatile default, an
// evicting policy, and a managed service's habit of refusing CONFIG.
import { Redis } from 'ioredis';
import { readDurability, watchDurability } from '../../../src/store/redis-durability';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

describe('readDurability on a real Redis', () => {
  const servers: RedisServer[] = [];
  const clients: Redis[] = [];
  const clientOf = async (args: string[]) => {
    const server = await startRedisServer(args);
    servers.push(server);
    const client = new Redis(server.url);
    clients.push(client);
    return client;
  };

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await Promise.all(servers.map((s) => s.stop()));
  });

  test('append-only, fsync every second, noeviction: durable', async () => {
    const redis = await clientOf(['--appendonly', 'yes', '--appendfsync', 'everysec']);
    expect(await readDurability(redis)).toMatchObject({ state: 'durable' });
  });

  test('no persistence: not durable; allkeys-lru under a maxmemory: not durable', async () => {
    expect(await readDurability(await clientOf([]))).toMatchObject({
      state: 'not-durable',
      detail: expect.stringContaining('persistence is off'),
    });
    const evicting = await clientOf([
      '--appendonly',
      'yes',
      '--maxmemory',
      '64mb',
      '--maxmemory-policy',
      'allkeys-lru',
    ]);
    expect(await readDurability(evicting)).toMatchObject({
      state: 'not-durable',
      detail: expect.stringContaining('allkeys-lru'),
    });
  });

  test('CONFIG renamed away (a managed service): unknown, never failed', async () => {
    const redis = await clientOf(['--appendonly', 'yes', '--rename-command', 'CONFIG', '']);
    expect(await readDurability(redis)).toMatchObject({ state: 'unknown' });
  });

  test('the watch /readyz reads holds the last answer', async () => {
    const redis = await clientOf(['--appendonly', 'yes']);
    const watch = watchDurability(redis);
    try {
      for (let i = 0; i < 100 && !watch.latest(); i += 1) await new Promise((r) => setTimeout(r, 20));
      expect(watch.latest()).toMatchObject({ state: 'durable' });
    } finally {
      watch.stop();
    }
  });
});
