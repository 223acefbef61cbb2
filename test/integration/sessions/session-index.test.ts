// The session index (sets of session handles per provider session and user) in a real Redis, where whoever can
// write Redis may have put a key of another type: that key is not the index, never a store failure.
import { createRedisSessionIndex } from '../../../src/sessions/session-index';
import { createRedisClient, type RedisClient } from '../../../src/store/redis-connection';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { waitReady } from '../tokens/fleet-harness';

let server: RedisServer;
let client: RedisClient;

beforeAll(async () => {
  server = await startRedisServer();
  client = createRedisClient({
    topology: { kind: 'standalone', url: server.url },
    tls: false,
    keyPrefix: 'i:',
    allowMemoryStore: false,
  }) as RedisClient;
  client.on('error', () => undefined);
  await waitReady(client);
});
afterAll(async () => {
  client?.disconnect();
  await server?.stop();
});

/** Everything but the set the index writes. */
const WRONG_TYPES: [string, (key: string) => Promise<unknown>][] = [
  ['a string', (key) => client.set(key, 'forged')],
  ['a hash', (key) => client.hset(key, 'field', 'value')],
  ['a list', (key) => client.rpush(key, 'value')],
  ['a stream', (key) => client.xadd(key, '*', 'field', 'value')],
];

test.each(WRONG_TYPES)(
  '%s under a session-sub key: read as empty, the next session added replaces it and is found',
  async (_name, write) => {
    const index = createRedisSessionIndex(client);
    const key = `i:session-sub:${_name.replace(' ', '-')}`;
    await write(key);
    expect(await index.members(key)).toEqual([]);
    await index.remove(key, 'handle-0');

    await index.add(key, 'handle-1', 60_000);
    expect(await client.type(key)).toBe('set');
    expect(await index.members(key)).toEqual(['handle-1']);
    expect(await client.pttl(key)).toBeGreaterThan(59_000);
  },
);
