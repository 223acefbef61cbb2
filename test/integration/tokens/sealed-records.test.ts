// Nothing read from Redis is trusted blindly: forged, tampered, transplanted and far-future records in a real Redis.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { tokenKeys } from '../../../src/keys/redis-keys';
import type { Metrics } from '../../../src/observability/metrics';
import { SEED_PLAN_ID } from '../../../src/simulator/plans';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import type { RedisClient } from '../../../src/store/redis-connection';
import { credentialsOf } from '../../../src/tokens/internal/credentials';
import { createTokenCipher } from '../../../src/tokens/internal/token-cipher';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway } from '../../support/in-process-gateway';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { type Fleet, PASSWORD, sleep, startFleet, USERNAME } from './fleet-harness';

jest.setTimeout(60_000);

const YEAR = 365 * 24 * 3_600_000;

async function rejected(metrics: Metrics, kind: string): Promise<number> {
  const text = await metrics.registry.getSingleMetricAsString('store_records_rejected_total');
  return Number(new RegExp(`kind="${kind}"} (\\d+)`).exec(text)?.[1] ?? 0);
}

/** A refusal of the fleet's own credentials that would block it for ever if it were believed. */
function forgedRefusal(overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    reason: 'UPSTREAM_AUTH_FAILED',
    at: Date.now() + YEAR,
    waitMs: 10 * YEAR,
    streak: 1_000,
    credentials: credentialsOf(USERNAME, PASSWORD).fingerprint,
    ...overrides,
  });
}

describe('refusal records in Redis', () => {
  let fleet: Fleet | undefined;
  afterEach(async () => {
    await fleet?.stop();
    fleet = undefined;
  });

  const key = randomBytes(32);
  const cipher = createTokenCipher(key);
  const variants: [string, (keys: ReturnType<typeof tokenKeys>) => string][] = [
    ['forged in plaintext', () => forgedRefusal()],
    [
      'tampered (one byte of a sealed record changed)',
      (keys) => {
        const sealed = cipher.seal(forgedRefusal(), keys.failure);
        const body = Buffer.from(sealed.slice(3), 'base64');
        body[20] ^= 1;
        return `v1:${body.toString('base64')}`;
      },
    ],
    [
      'sealed with another key',
      (keys) => createTokenCipher(randomBytes(32)).seal(forgedRefusal(), keys.failure),
    ],
    ['transplanted from another key name', (keys) => cipher.seal(forgedRefusal(), keys.transient)],
  ];

  it.each(variants)(
    'with TOKEN_ENCRYPTION_KEY, a record %s is ignored, counted, and the fleet serves at once',
    async (_name, forge) => {
      fleet = await startFleet({
        encryptionKey: key,
        settings: { loginMinIntervalMs: 20_000, loginMaxIntervalMs: 900_000 },
      });
      const f = fleet;
      const keys = tokenKeys('it:', f.simulator.url, USERNAME);
      await f.replicas[0].redis.set(keys.failure, forge(keys), 'PX', 60_000);
      await f.replicas[0].redis.set(keys.transient, forge(keys), 'PX', 60_000);

      for (const replica of f.replicas) expect(await f.callPlan(replica)).toBe(200);
      expect(f.simulator.stats()).toMatchObject({ logins: 1, loginFailures: 0 });
      const counted = await Promise.all(f.replicas.map((r) => rejected(r.metrics, 'login_refusal')));
      expect(counted.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
      expect(await rejected(f.replicas[0].metrics, 'login_transient')).toBeGreaterThanOrEqual(1);
      // The success ended the (ignored) records for the fleet.
      expect(await f.replicas[0].redis.exists(keys.failure, keys.transient)).toBe(0);
      expect(f.logs()).toContain('token.store.unreadable');
    },
  );

  it('without a key, a far-future refusal blocks the fleet for one back-off interval at most', async () => {
    const maxMs = 1_500;
    fleet = await startFleet({ settings: { loginMinIntervalMs: 300, loginMaxIntervalMs: maxMs } });
    const f = fleet;
    const keys = tokenKeys('it:', f.simulator.url, USERNAME);
    // Whoever can write Redis without a key configured can copy the fingerprint from the plaintext pair.
    await f.replicas[0].redis.set(keys.failure, forgedRefusal(), 'PX', YEAR);

    // Traffic reaches every replica: each reads the record, takes its time as now, and waits one interval at most.
    for (const replica of f.replicas) {
      const first = await replica.manager.getAccessToken().catch((e) => e);
      expect(first).toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
      expect(Number(first.headers['Retry-After'])).toBeLessThanOrEqual(Math.ceil(maxMs / 1000));
    }

    // One interval later (the forged record still in Redis), every replica serves.
    await sleep(maxMs + 100);
    for (const replica of f.replicas) expect(await f.callPlan(replica)).toBe(200);
    expect(f.simulator.stats()).toMatchObject({ logins: 1, loginFailures: 0 });
    expect(await f.replicas[0].redis.exists(keys.failure)).toBe(0);
  });
});

/** Whoever can write Redis puts a key of another type than the strings the gateway writes. */
const WRONG_TYPES: [string, (client: RedisClient, key: string) => Promise<unknown>][] = [
  ['a hash', (client, key) => client.hset(key, 'field', 'value')],
  ['a list', (client, key) => client.rpush(key, 'value')],
  ['a set', (client, key) => client.sadd(key, 'value')],
  ['a stream', (client, key) => client.xadd(key, '*', 'field', 'value')],
];

describe('token keys holding another type than a string', () => {
  let fleet: Fleet | undefined;
  afterEach(async () => {
    await fleet?.stop();
    fleet = undefined;
  });

  it.each(WRONG_TYPES)(
    '%s at the pair, refusal, transient and lock: ignored, counted, one login for the fleet, the store healthy',
    async (_name, write) => {
      fleet = await startFleet({ encryptionKey: randomBytes(32) });
      const f = fleet;
      const keys = tokenKeys('it:', f.simulator.url, USERNAME);
      for (const key of [keys.pair, keys.failure, keys.transient, keys.lock])
        await write(f.replicas[0].redis, key);

      for (const replica of f.replicas) expect(await f.callPlan(replica)).toBe(200);
      expect(f.simulator.stats()).toMatchObject({ logins: 1, loginFailures: 0 });
      for (const replica of f.replicas) expect(replica.manager.status().storeHealthy).toBe(true);
      const counted = await Promise.all(f.replicas.map((r) => rejected(r.metrics, 'token_pair')));
      expect(counted.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
      expect(await rejected(f.replicas[0].metrics, 'login_refusal')).toBeGreaterThanOrEqual(1);
      // The login's write replaced the pair and ended the unreadable failure records.
      expect(await f.replicas[0].redis.type(keys.pair)).toBe('string');
      expect(await f.replicas[0].redis.exists(keys.failure, keys.transient)).toBe(0);
    },
  );
});

describe('the plan cache in Redis', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  const apiKey = `pbk_sealed-${randomBytes(12).toString('hex')}`;
  let clientsFile: string;

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0, username: USERNAME, password: PASSWORD }),
    ]);
    clientsFile = writeClientsFile([{ id: 'sealed', keys: [apiKey], scopes: ['plans:read'] }]);
  });
  afterAll(async () => {
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  async function gatewayWith(extra: Record<string, string>) {
    const prefix = `sealed-${randomBytes(4).toString('hex')}:`;
    const gateway = await startTestGateway({
      NODE_ENV: 'test',
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: USERNAME,
      UPSTREAM_PASSWORD: PASSWORD,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: prefix,
      PLAN_CACHE_TTL_SECONDS: '60',
      CLIENTS_FILE: clientsFile,
      ...extra,
    });
    const read = async () => {
      const res = await fetch(`${gateway.url}/api/subscriptions/plan/${SEED_PLAN_ID}`, {
        headers: { 'x-api-key': apiKey },
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    // A plain client, to write what an attacker with access to Redis would.
    const client = new Redis(redis.url);
    const cacheKey = async () => {
      const names = await client.keys(`${prefix}cache:*`);
      expect(names).toHaveLength(1);
      return names[0];
    };
    return {
      gateway,
      read,
      client,
      cacheKey,
      async close() {
        client.disconnect();
        await gateway.close();
      },
    };
  }

  const forgedAnswer = JSON.stringify({
    s: 200,
    h: { 'content-type': 'application/json' },
    b: Buffer.from(JSON.stringify({ internalId: SEED_PLAN_ID, name: 'FORGED' })).toString('base64'),
  });

  it('with TOKEN_ENCRYPTION_KEY entries are sealed; forged and tampered ones are ignored, counted, and never served', async () => {
    const g = await gatewayWith({ TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    try {
      const real = await g.read();
      expect(real.status).toBe(200);
      const name = await g.cacheKey();
      const sealed = (await g.client.get(name)) as string;
      expect(sealed.startsWith('v1:')).toBe(true);
      expect(sealed).not.toContain(String(real.body.name));
      const readsBefore = simulator.stats().planReads;

      const body = Buffer.from(sealed.slice(3), 'base64');
      body[body.length - 1] ^= 1;
      for (const forged of [forgedAnswer, `v1:${body.toString('base64')}`]) {
        await g.client.set(name, forged, 'EX', 60);
        const answer = await g.read();
        expect(answer.status).toBe(200);
        expect(answer.body).toEqual(real.body);
      }
      expect(simulator.stats().planReads).toBe(readsBefore + 2);
      expect(await rejected(g.gateway.gateway.metrics, 'plan_cache')).toBe(2);
      // The upstream's answer replaced the forgery: the next read is a sealed cache hit again.
      await g.read();
      expect(simulator.stats().planReads).toBe(readsBefore + 2);
    } finally {
      await g.close();
    }
  });

  it('an entry kept past its TTL (its expiry lifted, or a copy written back) is not served: its end is sealed in it', async () => {
    const g = await gatewayWith({
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      PLAN_CACHE_TTL_SECONDS: '1',
    });
    try {
      const real = await g.read();
      const name = await g.cacheKey();
      const captured = (await g.client.get(name)) as string;
      // Whoever can write Redis keeps the entry for ever, and keeps a copy to write back later.
      await g.client.persist(name);
      // Past its end by more than the replicas' clock tolerance (1 s): Redis kept it longer than it was written for.
      await sleep(2_200);
      const readsBefore = simulator.stats().planReads;
      expect(await g.read()).toEqual(real);
      expect(simulator.stats().planReads).toBe(readsBefore + 1);

      await g.client.set(name, captured);
      expect(await g.read()).toEqual(real);
      expect(simulator.stats().planReads).toBe(readsBefore + 2);
      expect(await rejected(g.gateway.gateway.metrics, 'plan_cache')).toBe(2);
    } finally {
      await g.close();
    }
  });

  it('an entry of another type (hash, list, set, stream) is a miss, counted, and the next write replaces it', async () => {
    const g = await gatewayWith({ TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    try {
      const real = await g.read();
      const name = await g.cacheKey();
      for (const [, write] of WRONG_TYPES) {
        await g.client.del(name);
        await write(g.client, name);
        const readsBefore = simulator.stats().planReads;
        expect(await g.read()).toEqual(real);
        expect(simulator.stats().planReads).toBe(readsBefore + 1);
        expect(await g.client.type(name)).toBe('string');
        expect(await g.read()).toEqual(real);
        expect(simulator.stats().planReads).toBe(readsBefore + 1);
      }
      expect(await rejected(g.gateway.gateway.metrics, 'plan_cache')).toBe(WRONG_TYPES.length);
      expect(await g.gateway.gateway.metrics.registry.getSingleMetricAsString('token_store_healthy')).toMatch(
        /token_store_healthy 1/,
      );
      expect(g.gateway.logs()).not.toContain('redis unreachable');
    } finally {
      await g.close();
    }
  });

  it('without a key entries are plaintext, and one that is not a cached answer is ignored and counted', async () => {
    const g = await gatewayWith({});
    try {
      const real = await g.read();
      const name = await g.cacheKey();
      expect(JSON.parse((await g.client.get(name)) as string).s).toBe(200);
      for (const garbage of [
        '{"s":"200","h":{},"b":""}',
        'not json',
        `v1:${randomBytes(40).toString('base64')}`,
      ]) {
        await g.client.set(name, garbage, 'EX', 60);
        expect(await g.read()).toEqual(real);
      }
      expect(await rejected(g.gateway.gateway.metrics, 'plan_cache')).toBe(3);
    } finally {
      await g.close();
    }
  });
});
