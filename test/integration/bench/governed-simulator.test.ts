// `npm run bench`'s governed gateway in front of the bundled simulator, both real processes started with the
// benchmark's own settings (writeGovernedSetup, featuredGatewayEnv, benchSimulatorEnv): each account logs in, reads
// through it succeed, and the benchmark's pre-flight check passes. The set-up once logged in as users the simulator
// did not know and every simulator scenario counted only errors; this test fails if that comes back.
import { type ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { featuredGatewayEnv, PLAN_ID, writeLoadClient } from '../../../bench/lib/fixtures';
import {
  benchSimulatorEnv,
  checkGovernedAccounts,
  GOVERNED_ACCOUNTS,
  writeGovernedSetup,
} from '../../../bench/lib/governed-setup';
import type { StatsSnapshot } from '../../../src/simulator/stats';
import { type GatewayProcess, startGatewayProcess } from '../../support/gateway-process';
import { freePort, waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { tempDir } from '../../support/temp-dir';

const ROOT = resolve(__dirname, '..', '..', '..');
let simulator: ChildProcess | undefined;
let redis: RedisServer | undefined;
let gateway: GatewayProcess | undefined;

afterAll(async () => {
  await gateway?.stop();
  simulator?.kill('SIGKILL');
  await redis?.stop();
});

async function stats(url: string): Promise<StatsSnapshot> {
  return (await (await fetch(`${url}/__simulator/stats`)).json()) as StatsSnapshot;
}

it('logs both accounts of the governed set-up in to the simulator and reads through each', async () => {
  const port = await freePort();
  const simulatorUrl = `http://127.0.0.1:${port}`;
  // The simulator's CLI (`npm run simulator`), with the environment the benchmark gives it.
  simulator = spawn(process.execPath, ['--import', 'tsx', 'src/simulator/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      ...benchSimulatorEnv({ SIMULATOR_HOST: '127.0.0.1', SIMULATOR_PORT: String(port) }),
    },
    stdio: 'ignore',
  });
  await waitFor(async () => (await fetch(`${simulatorUrl}/__simulator/stats`)).ok, {
    timeoutMs: 20_000,
    what: 'the simulator',
  });
  redis = await startRedisServer();

  const { apiKey } = writeLoadClient('bench');
  const setup = writeGovernedSetup('bench', apiKey, simulatorUrl);
  gateway = await startGatewayProcess({
    env: featuredGatewayEnv({
      upstream: simulatorUrl,
      ...GOVERNED_ACCOUNTS.primary,
      redisUrl: redis.url,
      clientsFile: setup.clientsFile,
      accountsFile: setup.accountsFile,
      logFile: join(tempDir('bench-governed-log-'), 'gateway.log'),
    }),
  });
  const headers = { 'x-api-key': apiKey };

  // The benchmark's own pre-flight: one read through each account, answered 200 by that account.
  await checkGovernedAccounts(gateway.url, headers);
  // And reads without a choice (every scenario's load) go to the default account and succeed, several at once.
  const statuses = await Promise.all(
    Array.from({ length: 20 }, async () => {
      const answer = await fetch(`${gateway?.url}/api/subscriptions/plan/${PLAN_ID}`, { headers });
      await answer.arrayBuffer();
      return answer.status;
    }),
  );
  expect(statuses).toEqual(Array(20).fill(200));

  const counted = await stats(simulatorUrl);
  expect(counted.loginFailures).toBe(0);
  for (const { username } of Object.values(GOVERNED_ACCOUNTS)) {
    expect(counted.accounts[username]?.logins).toBeGreaterThanOrEqual(1);
    expect(counted.accounts[username]?.calls).toBeGreaterThanOrEqual(1);
  }
  expect(Object.keys(counted.accounts).sort()).toEqual(
    Object.values(GOVERNED_ACCOUNTS)
      .map((a) => a.username)
      .sort(),
  );
});

it('fails the pre-flight, naming the account, when the simulator does not hold its merchant', async () => {
  // A simulator started without the benchmark's settings knows only its own pair: `secondary` cannot log in.
  const port = await freePort();
  const bare = spawn(process.execPath, ['--import', 'tsx', 'src/simulator/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', SIMULATOR_HOST: '127.0.0.1', SIMULATOR_PORT: String(port) },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  let other: GatewayProcess | undefined;
  const otherRedis = await startRedisServer();
  try {
    await waitFor(async () => (await fetch(`${url}/__simulator/stats`)).ok, {
      timeoutMs: 20_000,
      what: 'the simulator',
    });
    const { apiKey } = writeLoadClient('bench');
    const setup = writeGovernedSetup('bench', apiKey, url);
    other = await startGatewayProcess({
      env: featuredGatewayEnv({
        upstream: url,
        ...GOVERNED_ACCOUNTS.primary,
        redisUrl: otherRedis.url,
        clientsFile: setup.clientsFile,
        accountsFile: setup.accountsFile,
        logFile: join(tempDir('bench-governed-log-'), 'gateway.log'),
      }),
    });
    await expect(checkGovernedAccounts(other.url, { 'x-api-key': apiKey })).rejects.toThrow(
      /account secondary: 5\d\d/,
    );
  } finally {
    await other?.stop();
    bare.kill('SIGKILL');
    await otherRedis.stop();
  }
});
