// Three real gateway processes sharing one real Redis in front of the simulator: the fleet's token economy.
import { randomBytes } from 'node:crypto';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type RedisServer, startRedisServer } from '../support/redis-server';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const API_KEY = `pbk_system-token-fleet-${randomBytes(12).toString('hex')}`;
const USERNAME = 'system-fleet-merchant';
const PASSWORD = 'system-fleet-password';
const ACCESS_TTL_SECONDS = 4;
const SKEW_SECONDS = 2;

jest.setTimeout(120_000);

describe('a fleet of three gateway processes', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateways: GatewayProcess[] = [];

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({
        port: 0,
        username: USERNAME,
        password: PASSWORD,
        accessTtlSeconds: ACCESS_TTL_SECONDS,
      }),
    ]);
    const clientsFile = writeClientsFile([
      {
        id: 'fleet-test',
        keys: [API_KEY],
        scopes: ['plans:read'],
        rateLimit: { limit: 1_000_000, windowSeconds: 60 },
      },
    ]);
    const env = {
      NODE_ENV: 'test',
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: USERNAME,
      UPSTREAM_PASSWORD: PASSWORD,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `fleet-${Date.now()}:`,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      TOKEN_REFRESH_SKEW_SECONDS: String(SKEW_SECONDS),
      CLIENTS_FILE: clientsFile,
      LOG_LEVEL: 'info',
    };
    gateways = await Promise.all([1, 2, 3].map(() => startGatewayProcess({ env, startTimeoutMs: 40_000 })));
  }, 90_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  const get = async (gateway: GatewayProcess): Promise<number> => {
    try {
      const response = await fetch(gateway.url + PLAN, { headers: { 'X-API-Key': API_KEY } });
      await response.arrayBuffer();
      return response.status;
    } catch {
      return 599;
    }
  };

  test('a burst of 90 concurrent requests on the cold fleet costs exactly one login', async () => {
    expect(simulator.stats().logins).toBe(0);
    const statuses = await Promise.all(Array.from({ length: 90 }, (_, i) => get(gateways[i % 3]!)));
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(simulator.stats().logins).toBe(1);
    expect(simulator.stats().loginFailures).toBe(0);
  });

  test('steady load over three short token lifetimes: about one refresh per lifetime fleet-wide, every answer 200', async () => {
    const before = simulator.stats();
    const durationMs = 3 * ACCESS_TTL_SECONDS * 1000;
    const end = Date.now() + durationMs;
    const statuses: number[] = [];
    await Promise.all(
      gateways.map(async (gateway) => {
        while (Date.now() < end) {
          statuses.push(await get(gateway));
          await new Promise((r) => setTimeout(r, 25));
        }
      }),
    );
    const after = simulator.stats();
    const tokenCalls = after.logins - before.logins + (after.refreshes - before.refreshes);
    // Refreshed at exp - skew - jitter (<= 10 % of skew), exp in whole seconds: a cycle lasts 0.8 s to 2 s here.
    const cycles = Math.ceil(durationMs / ((ACCESS_TTL_SECONDS - 1 - SKEW_SECONDS * 1.1) * 1000));
    console.log(
      `fleet steady load: ${statuses.length} requests, ${after.refreshes - before.refreshes} refreshes, ` +
        `${after.logins - before.logins} logins, ${after.unauthorized - before.unauthorized} upstream 401s (bound ${cycles + 1})`,
    );
    expect(statuses.length).toBeGreaterThan(100);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(tokenCalls).toBeGreaterThanOrEqual(3);
    expect(tokenCalls).toBeLessThanOrEqual(cycles + 1);
    expect(after.logins - before.logins).toBe(0);
  });

  test('no token or credential appears in any replica log', () => {
    for (const gateway of gateways) {
      const logs = gateway.logs();
      expect(logs).not.toContain(PASSWORD);
      expect(logs).not.toContain(USERNAME);
      expect(logs).not.toMatch(/eyJ[\w-]+\.eyJ/);
    }
  });
});
