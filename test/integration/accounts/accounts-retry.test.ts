// An accounts file that names a credential file not written yet is refused (the last good set serves); once the file
// lands, the set follows without another change to the accounts file or a SIGHUP. Real gateway, real simulator.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { tempDir } from '../../support/temp-dir';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const KEY = `pbk_retry-${randomBytes(12).toString('hex')}`;
const MERCHANTS = {
  first: ['retry-first-user', `first-${randomBytes(6).toString('hex')}`],
  late: ['retry-late-user', `late-${randomBytes(6).toString('hex')}`],
} as const;

jest.setTimeout(60_000);

describe('an account whose credential file lands after the accounts file', () => {
  let simulator: RunningSimulator;
  let gateway: TestGateway;
  const dir = tempDir('bff-accounts-retry-');
  const accountsFile = join(dir, 'accounts.json');
  const file = (name: string) => join(dir, name);
  const entry = (id: string) => ({
    id,
    baseUrl: simulator.url,
    usernameFile: file(`${id}-username`),
    passwordFile: file(`${id}-password`),
  });
  const readPlan = async (account: string) => {
    const response = await fetch(gateway.url + PLAN, {
      headers: { 'X-API-Key': KEY, 'X-Upstream-Account': account },
    });
    await response.arrayBuffer();
    return response.status;
  };

  beforeAll(async () => {
    simulator = await startSimulator({
      port: 0,
      username: MERCHANTS.first[0],
      password: MERCHANTS.first[1],
      extraAccounts: [{ username: MERCHANTS.late[0], password: MERCHANTS.late[1] }],
    });
    writeFileSync(file('first-username'), MERCHANTS.first[0]);
    writeFileSync(file('first-password'), MERCHANTS.first[1]);
    writeFileSync(accountsFile, JSON.stringify({ accounts: [entry('first')] }));
    gateway = await startTestGateway({
      UPSTREAM_ACCOUNTS_FILE: accountsFile,
      UPSTREAM_ALLOW_HTTP: 'true',
      CLIENTS_FILE: writeClientsFile([
        { id: 'retry-test', keys: [KEY], scopes: ['plans:read'], accounts: ['first', 'late'] },
      ]),
    });
  });

  afterAll(async () => {
    await gateway?.close();
    await simulator?.close();
  });

  test('refused while the file is missing, served once it lands, with no further change to the accounts file', async () => {
    writeFileSync(file('late-username'), MERCHANTS.late[0]);
    writeFileSync(accountsFile, JSON.stringify({ accounts: [entry('first'), entry('late')] }));
    expect(await gateway.gateway.accounts.reload()).toBe(false);
    expect(gateway.logs()).toMatch(/late-password/);
    expect(await readPlan('late')).toBe(503);
    expect(await readPlan('first')).toBe(200);

    // Past the accounts file watch's own poll (5 s): from here on, nothing about the accounts file changes.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    const refusals = () => gateway.logs().split('accounts reload refused').length - 1;
    const refusedBefore = refusals();
    expect(gateway.gateway.accounts.health().lastFailure).toBe('invalid');

    writeFileSync(file('late-password'), MERCHANTS.late[1]);
    const deadline = Date.now() + 15_000;
    let status = await readPlan('late');
    while (Date.now() < deadline && status !== 200) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      status = await readPlan('late');
    }
    expect(status).toBe(200);
    expect(gateway.gateway.accounts.health()).toEqual({});
    // The retries that met the same problem were quiet: no refusal logged on each attempt.
    expect(refusals()).toBe(refusedBefore);
  });
});
