// The plan cache is one merchant's own: an account id that now logs in as another merchant (its accounts file entry
// or its credential files changed) never serves the previous merchant's cached plan answers. Real Redis, the real
// simulator holding three merchants, the real gateway.
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { tempDir } from '../../support/temp-dir';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const KEY = `pbk_plancache-${randomBytes(12).toString('hex')}`;
const MERCHANTS = {
  br: ['merchant-br-user', `br-${randomBytes(6).toString('hex')}`],
  ar: ['merchant-ar-user', `ar-${randomBytes(6).toString('hex')}`],
  cl: ['merchant-cl-user', `cl-${randomBytes(6).toString('hex')}`],
} as const;
type Merchant = keyof typeof MERCHANTS;

jest.setTimeout(60_000);

describe('the plan cache across a change of merchant under one account id', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateway: TestGateway;
  const dir = tempDir('bff-plan-cache-');
  const accountsFile = join(dir, 'accounts.json');
  const secrets = (name: string, merchant: Merchant) => {
    const usernameFile = join(dir, `${name}-username`);
    const passwordFile = join(dir, `${name}-password`);
    writeFileSync(usernameFile, MERCHANTS[merchant][0]);
    writeFileSync(passwordFile, MERCHANTS[merchant][1]);
    return { usernameFile, passwordFile };
  };
  const writeAccount = (files: { usernameFile: string; passwordFile: string }) =>
    writeFileSync(
      accountsFile,
      JSON.stringify({ accounts: [{ id: 'merchant', baseUrl: simulator.url, ...files }] }),
    );
  const calls = (merchant: Merchant) => simulator.stats().accounts[MERCHANTS[merchant][0]]?.calls ?? 0;
  const readPlan = async () => {
    const response = await fetch(gateway.url + PLAN, { headers: { 'X-API-Key': KEY } });
    await response.arrayBuffer();
    return response;
  };

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({
        port: 0,
        username: MERCHANTS.br[0],
        password: MERCHANTS.br[1],
        extraAccounts: (['ar', 'cl'] as const).map((m) => ({
          username: MERCHANTS[m][0],
          password: MERCHANTS[m][1],
        })),
      }),
    ]);
    writeAccount(secrets('br', 'br'));
    gateway = await startTestGateway({
      UPSTREAM_ACCOUNTS_FILE: accountsFile,
      UPSTREAM_ALLOW_HTTP: 'true',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `plan-cache-${Date.now()}:`,
      PLAN_CACHE_TTL_SECONDS: '600',
      CLIENTS_FILE: writeClientsFile([
        { id: 'plan-cache-test', keys: [KEY], scopes: ['plans:read'], accounts: ['merchant'] },
      ]),
    });
  });

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  test("an accounts file that points the id at another merchant's credentials: that merchant's own answer", async () => {
    expect((await readPlan()).status).toBe(200);
    expect((await readPlan()).status).toBe(200);
    expect(calls('br')).toBe(1); // the second read was the cache's

    writeAccount(secrets('ar', 'ar'));
    await gateway.gateway.reload();
    expect((await readPlan()).status).toBe(200);
    expect(calls('ar')).toBe(1);
    expect(calls('br')).toBe(1);
  });

  /**
   * A read of a plan id nobody cached (its 404 is shared among reads in flight, never cached) sent as merchant ar
   * while the provider holds each call 2 s; `rotate` changes the credential files while it is out, then a second
   * read is sent. Resolves with both answers, drained, and each merchant's calls since just before the first read.
   */
  async function readAcrossRotation(
    rotate: () => Promise<void>,
  ): Promise<{ answers: Response[]; since: (merchant: Merchant) => number }> {
    const unseen = `${PLAN.slice(0, PLAN.lastIndexOf('/'))}/${randomUUID()}`;
    const read = () => fetch(gateway.url + unseen, { headers: { 'X-API-Key': KEY } });
    writeAccount(secrets('ar', 'ar'));
    await gateway.gateway.reload();
    expect((await readPlan()).status).toBe(200); // logged in as ar, outside the latency
    const before = { ar: calls('ar'), br: calls('br'), cl: calls('cl') };
    simulator.setFaults({ latencyMs: 2_000 });
    try {
      let firstOut = true;
      const first = read().finally(() => {
        firstOut = false;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      await rotate();
      expect(firstOut).toBe(true); // else the second read could not have joined it: the test would prove nothing
      const answers = await Promise.all([first, read()]);
      await Promise.all(answers.map((answer) => answer.arrayBuffer()));
      return { answers, since: (merchant) => calls(merchant) - before[merchant] };
    } finally {
      simulator.setFaults({});
    }
  }

  test('a read out when the credentials rotate is not shared with one made after: each merchant its own call', async () => {
    const { answers, since } = await readAcrossRotation(async () => {
      secrets('ar', 'br');
      await gateway.gateway.reload();
    });
    expect(answers.map((answer) => answer.status)).toEqual([404, 404]);
    expect(since('ar')).toBe(1);
    expect(since('br')).toBe(1);
  });

  test('credentials rotated away and back while a read is out: a read after is not joined to it', async () => {
    // With no read while the other merchant's credentials were in place, only a count of the changes tells the first
    // read (whose token may have been either merchant's) from one made after.
    const { since } = await readAcrossRotation(async () => {
      secrets('ar', 'br');
      await gateway.gateway.reload();
      secrets('ar', 'ar');
      await gateway.gateway.reload();
    });
    expect(since('ar')).toBe(2);
  });

  test("the account's credential files rotated to another merchant: that merchant's own answer", async () => {
    // The account reads ar-username and ar-password now; they are rewritten with the third merchant's pair.
    secrets('ar', 'cl');
    await gateway.gateway.reload();
    expect((await readPlan()).status).toBe(200);
    expect(calls('cl')).toBe(1);
  });
});
