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

  test('a Redis before 7.0 (one parameter per CONFIG GET) is read, not reported as refusing CONFIG', async () => {
    // Redis 6.2 (the oldest the quota script runs on: SET … PXAT) answers a CONFIG GET of several parameters with
    // this error; one parameter at a time it answers. A real volatile redis-server behind that rule.
    const real = await clientOf([]);
    const redis6 = {
      call: (...args: string[]) =>
        args[0] === 'CONFIG' && args.length > 3
          ? Promise.reject(
              new Error("ERR Unknown subcommand or wrong number of arguments for 'get'. Try CONFIG HELP."),
            )
          : real.call(args[0] as string, ...args.slice(1)),
    } as unknown as Redis;
    expect(await readDurability(redis6)).toMatchObject({
      state: 'not-durable',
      detail: expect.stringContaining('persistence is off'),
    });
  });

  test('a server that answers CONFIG GET without the settings (a proxy, a Redis-like store): unknown, not "persistence is off"', async () => {
    const real = await clientOf(['--appendonly', 'yes']);
    // Redis itself answers an unknown parameter with an empty list: what such a server answers for all of them.
    const proxy = {
      call: (...args: string[]) =>
        args[0] === 'CONFIG' ? real.call('CONFIG', 'GET', 'no-such-parameter') : real.call(args[0] as string),
    } as unknown as Redis;
    expect(await readDurability(proxy)).toMatchObject({ state: 'unknown' });
  });

  test('an ACL user without CONFIG (-@admin): unknown, never failed', async () => {
    const admin = await clientOf([]);
    await admin.call('ACL', 'SETUSER', 'ledger', 'on', '>s3cret', '~*', '+@all', '-@admin');
    const limited = admin.duplicate({ username: 'ledger', password: 's3cret' });
    clients.push(limited);
    expect(await readDurability(limited)).toMatchObject({ state: 'unknown' });
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
