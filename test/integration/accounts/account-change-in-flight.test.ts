// A request that chose its account before the account was changed (a slow upload of its body) is still served: the
// unit it chose is not closed under it. Real gateway, real simulator, a real socket writing the body in two parts.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { tempDir } from '../../support/temp-dir';

const USERNAME = 'in-flight-merchant';
const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;
const KEY = `pbk_inflight-${randomBytes(12).toString('hex')}`;
const BODY = JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } });

jest.setTimeout(60_000);

describe('a request in flight across a change of its account', () => {
  let simulator: RunningSimulator;
  let gateway: TestGateway;
  const dir = tempDir('bff-account-in-flight-');
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

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    writeFileSync(usernameFile, USERNAME);
    writeFileSync(passwordFile, PASSWORD);
    writeAccount(5_000);
    gateway = await startTestGateway({
      UPSTREAM_ACCOUNTS_FILE: accountsFile,
      UPSTREAM_ALLOW_HTTP: 'true',
      CLIENTS_FILE: writeClientsFile([{ id: 'in-flight-test', keys: [KEY], scopes: ['documents:validate'] }]),
    });
  });

  afterAll(async () => {
    await gateway?.close();
    await simulator?.close();
  });

  test('its body finishes after the reload: it is answered 200 by the account it named', async () => {
    const answer = new Promise<{ status: number; account: string | undefined; body: string }>(
      (resolve, reject) => {
        const req = request(`${gateway.url}/api/validation/document`, {
          method: 'POST',
          headers: {
            'x-api-key': KEY,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(BODY),
          },
        });
        req.on('response', (res) => {
          let body = '';
          res.on('data', (chunk) => {
            body += chunk;
          });
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              account: res.headers['x-upstream-account'] as string,
              body,
            }),
          );
        });
        req.on('error', reject);
        req.write(BODY.slice(0, 10));
        // The rest of the body after the account was changed and its old unit closed.
        setTimeout(async () => {
          writeAccount(6_000);
          await gateway.gateway.reload();
          await new Promise((r) => setTimeout(r, 300));
          req.end(BODY.slice(10));
        }, 200);
      },
    );
    const { status, account, body } = await answer;
    expect({ status, body: status === 200 ? 'ok' : body }).toEqual({ status: 200, body: 'ok' });
    expect(account).toBe('merchant');
    expect(gateway.logs()).toContain('"changed":["merchant"]');
  });
});
