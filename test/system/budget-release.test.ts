// A replica's hold on the fleet's provider budget when it stops: two real gateway processes, one real Redis, the
// fleet's record read as the doctor reads it. A clean stop (SIGTERM) gives the hold back at once; a killed replica's
// hold ends with its lease.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { type FleetView, fetchFleetView } from '../../src/budget';
import { budgetKeys } from '../../src/keys/redis-keys';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { waitFor } from '../support/ports';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { tempDir } from '../support/temp-dir';

jest.setTimeout(120_000);

const MERCHANT = ['budget-release-user', `release-${randomBytes(6).toString('hex')}`] as const;
const PREFIX = `release-${Date.now()}:`;
/** The longest lease the exchange script gives: 2 × the far interval (5 s) + 1 s. */
const LONGEST_LEASE_MS = 11_000;

describe("a replica's budget hold when it stops", () => {
  let redis: RedisServer;
  let client: Redis;
  let simulator: RunningSimulator;
  let gateways: GatewayProcess[] = [];
  const key = budgetKeys(PREFIX, 'budgeted').fleet;
  const fleet = (): Promise<FleetView> => fetchFleetView(client, key);

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0, username: MERCHANT[0], password: MERCHANT[1] }),
    ]);
    client = new Redis(redis.url);
    const dir = tempDir('bff-release-');
    const secret = (name: string, value: string) => {
      writeFileSync(join(dir, name), value);
      return join(dir, name);
    };
    const accountsFile = join(dir, 'accounts.json');
    writeFileSync(
      accountsFile,
      JSON.stringify({
        accounts: [
          {
            id: 'budgeted',
            baseUrl: simulator.url,
            usernameFile: secret('username', MERCHANT[0]),
            passwordFile: secret('password', MERCHANT[1]),
            budget: { requestsPerSecond: 40 },
          },
        ],
      }),
    );
    const env = {
      UPSTREAM_ACCOUNTS_FILE: accountsFile,
      UPSTREAM_ALLOW_HTTP: 'true',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: PREFIX,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CLIENTS_FILE: writeClientsFile([]),
      LOG_LEVEL: 'warn',
    };
    gateways = await Promise.all([1, 2].map(() => startGatewayProcess({ env, startTimeoutMs: 60_000 })));
    // Each replica exchanges once at start: the record holds both.
    await waitFor(async () => (await fleet()).replicas.length === 2, {
      what: 'both replicas in the fleet record',
    });
  }, 90_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    client?.disconnect();
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  test('SIGTERM: the stopped replica is out of the fleet record as soon as it has exited, its hold grantable at once', async () => {
    const before = await fleet();
    expect(before.replicas.every((replica) => replica.hold > 0)).toBe(true);
    const [stopped] = gateways;
    expect(await stopped?.stop('SIGTERM')).toBe(0);
    // Read once, right after the exit: before the fix the stopped replica's lease (up to 11 s) still held its part.
    const after = await fleet();
    expect(after.replicas).toHaveLength(1);
  });

  test('SIGKILL: nothing can give the hold back; the fleet frees it when the lease ends (at most 11 s later)', async () => {
    const killed = gateways[1];
    killed?.child.kill('SIGKILL');
    await killed?.exited;
    const after = await fleet();
    expect(after.replicas).toHaveLength(1);
    expect(after.replicas[0]?.leaseForMs).toBeLessThanOrEqual(LONGEST_LEASE_MS);
  });
});
