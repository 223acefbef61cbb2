// The benchmark's governed set-up logs its accounts in with credentials the bench's simulators accept: with
// `<user>-primary` and `<user>-secondary` the simulator refused both, and `npm run bench` counted only errors.
import { readFileSync } from 'node:fs';
import { benchSimulatorEnv, GOVERNED_ACCOUNTS, writeGovernedSetup } from '../../../bench/lib/governed-setup';
import { loadSimulatorConfig } from '../../../src/simulator/simulator-config';

interface AccountEntry {
  id: string;
  baseUrl: string;
  usernameFile: string;
  passwordFile: string;
}

it("gives each governed account a username and password that the bench's simulator holds, one merchant each", () => {
  const { accountsFile, clientsFile } = writeGovernedSetup('bench', 'load-key', 'http://127.0.0.1:1');
  const { accounts } = JSON.parse(readFileSync(accountsFile, 'utf8')) as { accounts: AccountEntry[] };
  const credentials = accounts.map((account) => ({
    id: account.id,
    username: readFileSync(account.usernameFile, 'utf8'),
    password: readFileSync(account.passwordFile, 'utf8'),
  }));
  expect(credentials.map((c) => c.id)).toEqual(['primary', 'secondary']);

  // What the simulator process makes of the environment the benchmark starts it with (its own CLI parser).
  const simulator = loadSimulatorConfig(benchSimulatorEnv({ SIMULATOR_PORT: '0' }));
  const held = [
    { username: simulator.username, password: simulator.password },
    ...(simulator.extraAccounts ?? []),
  ];
  for (const { username, password } of credentials) expect(held).toContainEqual({ username, password });
  // Two merchants, not one logged in twice: the simulator's stats tell the accounts apart.
  expect(new Set(credentials.map((c) => c.username)).size).toBe(2);
  expect(credentials.map(({ username, password }) => ({ username, password }))).toEqual([
    GOVERNED_ACCOUNTS.primary,
    GOVERNED_ACCOUNTS.secondary,
  ]);

  const { clients } = JSON.parse(readFileSync(clientsFile, 'utf8')) as { clients: { accounts: string[] }[] };
  expect(clients[0]?.accounts).toEqual(['primary', 'secondary']);
});

it("keeps a test's own SIMULATOR_* settings beside the second merchant", () => {
  const env = benchSimulatorEnv({ SIMULATOR_ACCESS_TTL_SECONDS: '6' });
  expect(env.SIMULATOR_ACCESS_TTL_SECONDS).toBe('6');
  expect(loadSimulatorConfig(env).extraAccounts).toEqual([GOVERNED_ACCOUNTS.secondary]);
});
