// The Redis TokenStore against a real redis-server: atomic scripts, leases, and notifications across restarts.
import { Writable } from 'node:stream';
import pino from 'pino';
import { sessionKeys } from '../../../src/keys/redis-keys';
import { createLogoutReplays } from '../../../src/sessions/logout-replays';
import { createRedisClient, type RedisClient } from '../../../src/store/redis-connection';
import { createRedisTokenStore } from '../../../src/store/redis-token-store';
import { FOREIGN_VALUE } from '../../../src/store/wrong-type';
import type { TokenStore } from '../../../src/tokens/internal/token-store';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { sleep, waitReady } from '../tokens/fleet-harness';

const logger = pino({ level: 'silent' }, new Writable({ write: (_c, _e, cb) => cb() }));

describe('redis token store', () => {
  let server: RedisServer;
  let clients: RedisClient[];
  let stores: TokenStore[];

  beforeAll(async () => {
    server = await startRedisServer();
    clients = [0, 1].map(() => {
      const client = createRedisClient({
        topology: { kind: 'standalone', url: server.url },
        tls: false,
        keyPrefix: 't:',
        allowMemoryStore: false,
      }) as RedisClient;
      client.on('error', () => undefined);
      return client;
    });
    await Promise.all(clients.map((c) => waitReady(c)));
    stores = clients.map((client) => createRedisTokenStore({ client, logger }));
  });

  afterAll(async () => {
    for (const store of stores) await store.close();
    for (const client of clients) client.disconnect();
    await server.stop();
  });

  it('sets with a TTL and compare-and-deletes only the expected value', async () => {
    const [a, b] = stores;
    await a.set('t:{x}:pair', 'new', 60_000);
    expect(await clients[0].pttl('t:{x}:pair')).toBeGreaterThan(59_000);
    expect(await b.compareAndDelete('t:{x}:pair', 'old')).toBe(false);
    expect(await b.get('t:{x}:pair')).toBe('new');
    expect(await b.compareAndDelete('t:{x}:pair', 'new')).toBe(true);
    expect(await a.get('t:{x}:pair')).toBeUndefined();
  });

  it('the lock: one owner, owner-only release and extension, lease expiry', async () => {
    const [a, b] = stores;
    expect(await a.acquireLock('t:{x}:lock', 'owner-a', 200)).toBe(true);
    expect(await b.acquireLock('t:{x}:lock', 'owner-b', 200)).toBe(false);
    expect(await b.releaseLock('t:{x}:lock', 'owner-b')).toBe(false);
    expect(await b.extendLock?.('t:{x}:lock', 'owner-b', 5_000)).toBe(false);
    await sleep(250);
    expect(await b.acquireLock('t:{x}:lock', 'owner-b', 5_000)).toBe(true);
    expect(await a.releaseLock('t:{x}:lock', 'owner-a')).toBe(false);
    expect(await b.extendLock?.('t:{x}:lock', 'owner-b', 10_000)).toBe(true);
    expect(await clients[0].pttl('t:{x}:lock')).toBeGreaterThan(9_000);
    expect(await b.releaseLock('t:{x}:lock', 'owner-b')).toBe(true);
  });

  it('a lock no replica could have written (no expiry, a lease past the longest allowed, another type) is taken', async () => {
    const [a] = stores;
    const admin = clients[0];
    await admin.set('t:{x}:lock', 'forged');
    expect(await a.acquireLock('t:{x}:lock', 'owner-a', 5_000)).toBe(true);
    expect(await admin.get('t:{x}:lock')).toBe('owner-a');
    expect(await admin.pttl('t:{x}:lock')).toBeLessThanOrEqual(5_000);
    expect(await a.releaseLock('t:{x}:lock', 'owner-a')).toBe(true);

    await admin.set('t:{x}:lock', 'forged', 'PX', 10 * 365 * 24 * 3_600_000);
    expect(await a.acquireLock('t:{x}:lock', 'owner-a', 5_000)).toBe(true);
    expect(await a.releaseLock('t:{x}:lock', 'owner-a')).toBe(true);

    await admin.hset('t:{x}:lock', 'owner', 'forged');
    expect(await a.acquireLock('t:{x}:lock', 'owner-a', 5_000)).toBe(true);
    expect(await a.releaseLock('t:{x}:lock', 'owner-a')).toBe(true);

    // A replica's lease, however long the configuration allows, is still respected.
    await admin.set('t:{x}:lock', 'owner-b', 'PX', 120_000);
    expect(await a.acquireLock('t:{x}:lock', 'owner-a', 5_000)).toBe(false);
    await admin.del('t:{x}:lock');
  });

  it('a logout token is used once: its mark, a lease longer than any token lock, is never taken over', async () => {
    const replays = createLogoutReplays(stores[0], 't:');
    const elsewhere = createLogoutReplays(stores[1], 't:');
    expect(await replays.firstUse('https://issuer.example', 'jti-1')).toBe(true);
    expect(await elsewhere.firstUse('https://issuer.example', 'jti-1')).toBe(false);
    expect(await replays.firstUse('https://issuer.example', 'jti-1')).toBe(false);
  });

  describe('a key of another type than a string (whoever can write Redis put it)', () => {
    const wrongTypes: [string, (key: string) => Promise<unknown>][] = [
      ['a hash', (key) => clients[0].hset(key, 'field', 'value')],
      ['a list', (key) => clients[0].rpush(key, 'value')],
      ['a set', (key) => clients[0].sadd(key, 'value')],
      ['a stream', (key) => clients[0].xadd(key, '*', 'field', 'value')],
    ];

    it.each(wrongTypes)(
      '%s reads as FOREIGN_VALUE, never a failure; the compare scripts compare it as that, a write replaces it',
      async (_name, write) => {
        const [a] = stores;
        const key = 't:{x}:foreign';
        await clients[0].del(key);
        await write(key);
        expect(await a.get(key)).toBe(FOREIGN_VALUE);
        expect(await a.releaseLock(key, 'owner-a')).toBe(false);
        expect(await a.extendLock?.(key, 'owner-a', 5_000)).toBe(false);
        expect(await a.compareAndDelete(key, 'something else')).toBe(false);
        expect(await a.compareAndDelete(key, FOREIGN_VALUE)).toBe(true);
        expect(await clients[0].exists(key)).toBe(0);

        await write(key);
        await a.set(key, 'ours', 60_000);
        expect(await a.get(key)).toBe('ours');
        await clients[0].del(key);
      },
    );

    it.each(wrongTypes)(
      '%s at a used logout-token mark is not a mark: the token is used once from then on',
      async (_name, write) => {
        const replays = createLogoutReplays(stores[0], 't:');
        const elsewhere = createLogoutReplays(stores[1], 't:');
        const jti = `jti-${_name.replace(' ', '-')}`;
        const mark = sessionKeys('t:').usedLogoutToken('https://issuer.example', jti);
        await write(mark);
        expect(await replays.firstUse('https://issuer.example', jti)).toBe(true);
        expect(await elsewhere.firstUse('https://issuer.example', jti)).toBe(false);
        expect(await clients[0].type(mark)).toBe('string');
      },
    );
  });

  it('notifies subscribers on other connections, again after Redis restarts, and fails fast while it is down', async () => {
    const [a, b] = stores;
    const seen: string[] = [];
    const stop = b.subscribe('t:{x}:changed', (m) => seen.push(m));
    await sleep(100);
    await a.publish('t:{x}:changed', 'pair');
    await waitUntil(() => seen.length === 1);

    await server.kill();
    await waitUntil(() => !a.healthy());
    const started = Date.now();
    await expect(a.get('t:{x}:pair')).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(100);

    await server.restart();
    await Promise.all(clients.map((c) => waitReady(c)));
    await waitUntil(async () => {
      await a.publish('t:{x}:changed', 'again');
      return seen.includes('again');
    });
    stop();
    expect(a.healthy()).toBe(true);
  }, 20_000);
});

async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs = 8_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(50);
  }
}
