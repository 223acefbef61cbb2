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

/**
 * `client` as replica B sees it: the answer to its first transaction reaches it only after `meanwhile` (another
 * replica's work) has run. A fixed order of two real clients on a real Redis, no timing.
 */
function answeredAfter(meanwhile: () => Promise<void>): RedisClient {
  let first = true;
  const multi = () => {
    const transaction = client.multi();
    const exec = transaction.exec.bind(transaction);
    transaction.exec = async () => {
      const answer = await exec();
      if (first) {
        first = false;
        await meanwhile();
      }
      return answer;
    };
    return transaction;
  };
  return new Proxy(client, {
    get: (target, name) => {
      if (name === 'multi') return multi;
      const value = Reflect.get(target, name);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

test('two replicas replacing the same key of another type: neither deletes the index the other made meanwhile', async () => {
  const key = 'i:session-sub:raced';
  await client.hset(key, 'field', 'value');
  const replicaA = createRedisSessionIndex(client);
  // B finds the hash, then A finds it too, replaces it with the index and adds its session, then B goes on.
  const replicaB = createRedisSessionIndex(answeredAfter(() => replicaA.add(key, 'handle-a', 60_000)));

  await replicaB.add(key, 'handle-b', 60_000);

  expect((await replicaA.members(key)).sort()).toEqual(['handle-a', 'handle-b']);
});
