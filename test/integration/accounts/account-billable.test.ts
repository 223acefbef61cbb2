// An account's `"billable"` set decides what the quota and the ledger count: the real gateway, real Redis, the
// simulator playing two merchants. On "strict" (["2xx", "5xx"]) a 404 costs nothing and a 503 is billed; on
// "standard" (the default) a 404 is billed and a 503 is not.
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import type { RedisClient } from '../../../src/store/redis-connection';
import { readUsage, usageLedgerStore } from '../../../src/usage';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { tempDir } from '../../support/temp-dir';

jest.setTimeout(60_000);

const KEY = `pbk_billable-${randomBytes(12).toString('hex')}`;
const PREFIX = `billable-${Date.now()}:`;
const FAILING = { country: 'BRA', document: { id: '529.982.247-25', type: 'CPF' } };
const MERCHANTS = {
  strict: ['merchant-strict', `s-${randomBytes(6).toString('hex')}`],
  standard: ['merchant-standard', `d-${randomBytes(6).toString('hex')}`],
} as const;
type AccountId = keyof typeof MERCHANTS;

describe('an account billable set, through the gateway', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateway: TestGateway;
  const dir = tempDir('bff-billable-');

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({
        port: 0,
        username: MERCHANTS.strict[0],
        password: MERCHANTS.strict[1],
        extraAccounts: [{ username: MERCHANTS.standard[0], password: MERCHANTS.standard[1] }],
      }),
    ]);
    const file = (name: string, value: string) => {
      writeFileSync(join(dir, name), value);
      return join(dir, name);
    };
    const account = (id: AccountId, extra: object = {}) => ({
      id,
      baseUrl: simulator.url,
      usernameFile: file(`${id}-user`, MERCHANTS[id][0]),
      passwordFile: file(`${id}-password`, MERCHANTS[id][1]),
      ...extra,
    });
    gateway = await startTestGateway({
      UPSTREAM_ACCOUNTS_FILE: file(
        'accounts.json',
        JSON.stringify({ accounts: [account('strict', { billable: ['2xx', '5xx'] }), account('standard')] }),
      ),
      UPSTREAM_ALLOW_HTTP: 'true',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: PREFIX,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CLIENTS_FILE: writeClientsFile([
        {
          id: 'metered',
          keys: [KEY],
          scopes: ['plans:read', 'documents:validate'],
          accounts: ['strict', 'standard'],
          quota: { day: 2 },
        },
      ]),
    });
    simulator.setFaults({ failIds: [FAILING.document.id], errorStatus: 503 });
  });

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  const call = async (account: AccountId, what: 'unknown-plan' | 'failing') => {
    const headers = { 'x-api-key': KEY, 'x-upstream-account': account };
    const res =
      what === 'unknown-plan'
        ? await fetch(`${gateway.url}/api/subscriptions/plan/${randomUUID()}`, { headers })
        : await fetch(`${gateway.url}/api/validation/document`, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json' },
            body: JSON.stringify(FAILING),
          });
    const body = (await res.json()) as { status?: { description?: string } };
    return `${res.status} ${body.status?.description ?? ''}`;
  };
  const sequence = async (account: AccountId, what: 'unknown-plan' | 'failing', count: number) => {
    const out: string[] = [];
    for (let i = 0; i < count; i++) out.push(await call(account, what));
    return out;
  };

  test('the quota and the ledger count what the account bills, and nothing else', async () => {
    // strict: five 404s cost nothing; two 503s spend the day quota of 2; the next call is refused.
    expect(await sequence('strict', 'unknown-plan', 5)).toEqual(Array(5).fill('404 ERROR'));
    expect(await sequence('strict', 'failing', 2)).toEqual(Array(2).fill('502 UPSTREAM_UNAVAILABLE'));
    expect(await call('strict', 'unknown-plan')).toBe('429 QUOTA_EXCEEDED');
    // standard (the default set): 503s cost nothing; two 404s spend the quota.
    expect(await sequence('standard', 'failing', 3)).toEqual(Array(3).fill('502 UPSTREAM_UNAVAILABLE'));
    expect(await sequence('standard', 'unknown-plan', 3)).toEqual([
      '404 ERROR',
      '404 ERROR',
      '429 QUOTA_EXCEEDED',
    ]);

    await gateway.close();
    const client = new Redis(redis.url);
    try {
      const today = new Date().toISOString().slice(0, 10);
      const report = await readUsage(usageLedgerStore(client as unknown as RedisClient, PREFIX), {
        from: today,
        to: today,
      });
      const totals = Object.fromEntries(report.totals.map((t) => [t.account, t.counts]));
      expect(totals.strict).toEqual({
        answers4xx: 5,
        answers5xx: 2,
        billable: 2,
        'refused:QUOTA_EXCEEDED': 1,
      });
      expect(totals.standard).toEqual({
        answers4xx: 2,
        answers5xx: 3,
        billable: 2,
        'refused:QUOTA_EXCEEDED': 1,
      });
    } finally {
      client.disconnect();
    }
  });
});
