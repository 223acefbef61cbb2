// Real gateway processes sharing a real Redis where whoever can write it put keys of another type (hash, list, set,
// stream) at the token pair, its refusal and transient records and its lock: one login for the fleet, Redis healthy.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { tokenKeys } from '../../../src/keys/redis-keys';
import { SEED_PLAN_ID } from '../../../src/simulator/plans';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../../support/gateway-process';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

jest.setTimeout(90_000);

const USERNAME = 'wrong-type-merchant';
const PASSWORD = 'wrong-type-password-123';
const PREFIX = 'wrongtype:';
const apiKey = `pbk_wrongtype-${randomBytes(12).toString('hex')}`;

let redis: RedisServer;
let admin: Redis;
let simulator: RunningSimulator;
let gateways: GatewayProcess[] = [];

beforeAll(async () => {
  [redis, simulator] = await Promise.all([
    startRedisServer(),
    startSimulator({ port: 0, username: USERNAME, password: PASSWORD }),
  ]);
  admin = new Redis(redis.url);
});
afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  admin?.disconnect();
  await Promise.all([redis?.stop(), simulator?.close()]);
});

async function metric(gateway: GatewayProcess, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  return Number(pattern.exec(text)?.[1] ?? 0);
}

test('three replicas: keys of another type at every token key are ignored and counted, one login, Redis healthy', async () => {
  const keys = tokenKeys(PREFIX, simulator.url, USERNAME);
  await admin.hset(keys.pair, 'access', 'forged');
  await admin.rpush(keys.failure, 'forged');
  await admin.sadd(keys.transient, 'forged');
  await admin.xadd(keys.lock, '*', 'owner', 'forged');
  const env = {
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: PREFIX,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    CLIENTS_FILE: writeClientsFile([{ id: 'wrongtype', keys: [apiKey], scopes: ['plans:read'] }]),
  };
  gateways = await Promise.all([0, 1, 2].map(() => startGatewayProcess({ env })));

  for (const gateway of gateways) {
    const answer = await fetch(`${gateway.url}/api/subscriptions/plan/${SEED_PLAN_ID}`, {
      headers: { 'x-api-key': apiKey },
    });
    expect(answer.status).toBe(200);
  }
  expect(simulator.stats()).toMatchObject({ logins: 1, loginFailures: 0 });
  let rejected = 0;
  for (const gateway of gateways) {
    expect(await metric(gateway, /^token_store_healthy (\d+)/m)).toBe(1);
    expect(gateway.logs()).not.toContain('redis unreachable');
    rejected += await metric(gateway, /^store_records_rejected_total\{kind="token_pair"\} (\d+)/m);
  }
  expect(rejected).toBeGreaterThanOrEqual(1);
  expect(await admin.type(keys.pair)).toBe('string');
  expect(await admin.exists(keys.failure, keys.transient)).toBe(0);
});
