// A changed account (same id, new spec) is rebuilt and the old unit closed: the old unit's close must leave the new
// unit's metric series in place. Real gateway, real simulator.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { tempDir } from '../../support/temp-dir';

const USERNAME = 'metrics-merchant';
const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;

jest.setTimeout(60_000);

describe('metrics of an account changed at run time', () => {
  let simulator: RunningSimulator;
  let gateway: TestGateway;
  const dir = tempDir('bff-account-metrics-');
  const accountsFile = join(dir, 'accounts.json');
  const usernameFile = join(dir, 'username');
  const passwordFile = join(dir, 'password');
  const writeAccount = (timeoutMs: number) =>
    writeFileSync(
      accountsFile,
      JSON.stringify({
        accounts: [{ id: 'merchant', baseUrl: simulator.url, usernameFile, passwordFile, timeoutMs }],
      }),
    );
  const circuitSeries = async () => {
    const text = await (await fetch(`${gateway.url}/metrics`)).text();
    return text.split('\n').filter((line) => line.startsWith('upstream_circuit_state{'));
  };

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    writeFileSync(usernameFile, USERNAME);
    writeFileSync(passwordFile, PASSWORD);
    writeAccount(5_000);
    gateway = await startTestGateway({
      UPSTREAM_ACCOUNTS_FILE: accountsFile,
      UPSTREAM_ALLOW_HTTP: 'true',
      CLIENTS_FILE: writeClientsFile([
        {
          id: 'metrics-test',
          keys: [`pbk_metrics-${randomBytes(12).toString('hex')}`],
          scopes: ['plans:read'],
        },
      ]),
    });
  });

  afterAll(async () => {
    await gateway?.close();
    await simulator?.close();
  });

  test("the account's circuit state series stay exported after its old unit closes", async () => {
    const before = await circuitSeries();
    expect(before).toEqual(
      expect.arrayContaining([
        'upstream_circuit_state{operation="validation",account="merchant"} 0',
        'upstream_circuit_state{operation="plan",account="merchant"} 0',
      ]),
    );

    writeAccount(6_000);
    await gateway.gateway.reload();
    expect(gateway.logs()).toContain('"changed":["merchant"]');
    // The old unit has no call in flight: it closes at once; give its closers a moment.
    await new Promise((resolve) => setTimeout(resolve, 300));

    expect((await circuitSeries()).sort()).toEqual(before.sort());
  });
});
