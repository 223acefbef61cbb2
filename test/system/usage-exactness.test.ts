// The usage ledger is billing-grade: three real gateway processes, one real Redis, the simulator as the provider
// recording every answer it gives (account, X-Request-Id, status). Two clients on two accounts send a mixed load
// (cache hits, coalesced reads, invalid input, provider 4xx and 5xx, a 401 retry); after a graceful stop of every
// replica, `npm run usage`'s entry point must show, per client and account, the provider's own count of billable
// answers exactly, its answers by class exactly, and the gateway-side columns as they were sent.
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OperationAnswer } from '../../src/simulator/answer-log';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { runToExit } from '../support/run-to-exit';
import { tempDir } from '../support/temp-dir';

jest.setTimeout(240_000);

/** Seeded plans: one cached per client (read by that client only, one at a time, so never coalesced). */
const CACHED_PLAN = {
  shop: 'b8546575-5d4f-4a56-9e21-522d01cf5992',
  billing: '3f2c9a1e-7b4d-4e8a-9c61-0d5e2f7a8b90',
} as const;
const VALID_DOC = { country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } };
/** Valid for the gateway, a wrong check digit for the provider: 200 with code 300. */
const WRONG_DOC = { country: 'ARG', document: { id: '20-17254359-8', type: 'CUIT' } };
/** The provider fails on these (faults failIds): 503 during the load, 400 afterwards. */
const FAILING_DOC = { country: 'BRA', document: { id: '529.982.247-25', type: 'CPF' } };
const REJECTED_DOC = { country: 'CHL', document: { id: '12.345.678-5', type: 'RUT' } };
const CLIENTS = ['shop', 'billing'] as const;
const ACCOUNTS = ['alpha', 'beta'] as const;
type ClientId = (typeof CLIENTS)[number];
type AccountId = (typeof ACCOUNTS)[number];
const USERNAMES: Record<AccountId, string> = { alpha: 'ledger-alpha', beta: 'ledger-beta' };
const KEYS: Record<ClientId, string> = {
  shop: `pbk_shop-${randomBytes(12).toString('hex')}`,
  billing: `pbk_billing-${randomBytes(12).toString('hex')}`,
};
const PASSWORDS: Record<AccountId, string> = {
  alpha: `alpha-${randomBytes(8).toString('hex')}`,
  beta: `beta-${randomBytes(8).toString('hex')}`,
};
const PREFIX = `exact-${Date.now()}:`;
/** The unknown plan that every replica is asked for at once (404: coalesced, never cached). */
let COALESCED_PLAN = randomUUID();

type Kind =
  | 'first-read'
  | 'cached'
  | 'coalesce'
  | 'valid'
  | 'wrong'
  | 'unknown-plan'
  | 'invalid'
  | 'unsupported'
  | 'failing'
  | 'rejected'
  | 'after-revoke';

interface Sent {
  readonly client: ClientId;
  readonly account: AccountId;
  readonly kind: Kind;
  readonly requestId: string;
  readonly status: number;
  readonly reason?: string;
}

type Counts = Record<string, number>;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const isBillable = (s: number) =>
  (s >= 200 && s < 300) || (s >= 400 && s < 500 && ![401, 403, 429].includes(s));
const classOf = (s: number) => (s >= 500 ? 'answers5xx' : s >= 400 ? 'answers4xx' : 'answers2xx');

describe('usage ledger against the provider: three replicas, mixed load, graceful stop', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateways: GatewayProcess[] = [];
  let env: Record<string, string> = {};
  const dir = tempDir('bff-exact-');
  const sent: Sent[] = [];
  let sequence = 0;

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({
        port: 0,
        username: USERNAMES.alpha,
        password: PASSWORDS.alpha,
        extraAccounts: [{ username: USERNAMES.beta, password: PASSWORDS.beta }],
      }),
    ]);
    env = gatewayEnv(dir, simulator, redis.url);
    gateways = await Promise.all([1, 2, 3].map(() => startGatewayProcess({ env, startTimeoutMs: 90_000 })));
  }, 180_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  /** One request of `client` on `account` through replica `replica`, tagged with a request id naming the client. */
  async function send(client: ClientId, account: AccountId, kind: Kind, replica: number): Promise<Sent> {
    sequence += 1;
    const requestId = `${client}-${kind}-${sequence}`;
    const gateway = gateways[replica % gateways.length] as GatewayProcess;
    const { path, init } = requestOf(kind, client);
    let status = 599;
    let reason: string | undefined;
    try {
      const res = await fetch(gateway.url + path, {
        ...init,
        headers: {
          ...init.headers,
          'x-api-key': KEYS[client],
          'x-upstream-account': account,
          'x-request-id': requestId,
        },
      });
      status = res.status;
      const body = (await res.json().catch(() => ({}))) as { status?: { description?: string } };
      if (res.headers.get('x-request-id') !== requestId) throw new Error('request id not kept');
      if (status >= 400 && body.status?.description && /^[A-Z_]+$/.test(body.status.description))
        reason = body.status.description;
    } catch (error) {
      reason = (error as Error).message;
    }
    const outcome: Sent = { client, account, kind, requestId, status, ...(reason && { reason }) };
    sent.push(outcome);
    return outcome;
  }

  test('billable per client and account equals the provider count exactly; every other column matches what was sent', async () => {
    await warmUp(send);
    await mixedLoad(send, simulator);
    await coalescedReads(send, simulator);
    await afterRevocation(send, simulator);
    simulator.setFaults({ failIds: [REJECTED_DOC.document.id], errorStatus: 400 });
    await Promise.all(
      CLIENTS.flatMap((c) => ACCOUNTS.map((a, i) => sequentially(3, (n) => send(c, a, 'rejected', n + i)))),
    );
    simulator.setFaults({});

    // Graceful stop of every replica (SIGTERM): each writes its ledger a last time.
    const codes = await Promise.all(gateways.map((g) => g.stop()));
    expect(codes).toEqual([0, 0, 0]);
    const cli = await runToExit('src/usage/usage-cli.ts', { ...env, NODE_ENV: 'test' }, ['--format', 'json']);
    expect(cli.code).toBe(0);
    const ledger = totalsOf(
      JSON.parse(cli.output) as { totals: { client: string; account: string; counts: Counts }[] },
    );
    const provider = providerCounts(simulator.answers());
    console.log(
      `ledger ${JSON.stringify(ledger)}\nprovider ${JSON.stringify(provider)}\nsent ${JSON.stringify(summary(sent))}`,
    );

    // Gateway refusals never reached the provider.
    const reached = new Set(simulator.answers().map((a) => a.requestId));
    expect(
      sent.filter((s) => (s.kind === 'invalid' || s.kind === 'unsupported') && reached.has(s.requestId)),
    ).toEqual([]);
    // The 401 retry happened on both accounts, and its callers were answered 200.
    const unauthorized = simulator.answers().filter((a) => a.status === 401);
    expect(new Set(unauthorized.map((a) => a.account))).toEqual(new Set(Object.values(USERNAMES)));
    expect(sent.filter((s) => s.kind === 'after-revoke').every((s) => s.status === 200)).toBe(true);

    for (const client of CLIENTS)
      for (const account of ACCOUNTS) {
        const name = `${client}/${account}`;
        const row = ledger[name] ?? {};
        const up = provider[`${client}/${USERNAMES[account]}`] ?? {};
        const mine = sent.filter((s) => s.client === client && s.account === account);
        const count = (kind: Kind) => mine.filter((s) => s.kind === kind).length;
        expect({ name, billable: row.billable }).toEqual({ name, billable: up.billable });
        for (const column of ['answers2xx', 'answers4xx', 'answers5xx'])
          expect({ name, column, value: row[column] ?? 0 }).toEqual({ name, column, value: up[column] ?? 0 });
        expect(up.billable).toBeGreaterThan(0);
        expect(up.answers5xx).toBeGreaterThan(0);
        // What was sent: 2xx, 4xx (the 401 before each retry among them, not billable) and 5xx by kind.
        const leaders = mine.filter((s) => s.kind === 'coalesce' && reached.has(s.requestId)).length;
        const twoXx = count('valid') + count('wrong') + count('first-read') + count('after-revoke');
        const fourXx = count('unknown-plan') + count('rejected') + leaders;
        expect({
          name,
          answers2xx: row.answers2xx,
          answers4xx: row.answers4xx,
          answers5xx: row.answers5xx,
        }).toEqual({
          name,
          answers2xx: twoXx,
          answers4xx: fourXx + (up.unauthorized ?? 0),
          answers5xx: count('failing'),
        });
        expect(row.billable).toBe(twoXx + fourXx);
        expect({ name, invalid: row['refused:INVALID_REQUEST'] ?? 0 }).toEqual({
          name,
          invalid: count('invalid'),
        });
        expect({ name, unsupported: row['refused:UNSUPPORTED_MEDIA_TYPE'] ?? 0 }).toEqual({
          name,
          unsupported: count('unsupported'),
        });
        expect({ name, cacheHits: row.cacheHits ?? 0 }).toEqual({ name, cacheHits: count('cached') });
        // Coalesced: the identical reads of this client on this account that the provider never saw.
        const followers = mine.filter((s) => s.kind === 'coalesce' && !reached.has(s.requestId)).length;
        expect({ name, coalesced: row.coalesced ?? 0 }).toEqual({ name, coalesced: followers });
        expect(followers).toBeGreaterThan(0);
        expect(row.timeouts ?? 0).toBe(0);
        const refusedColumns = Object.keys(row).filter((c) => c.startsWith('refused:'));
        expect(refusedColumns.sort()).toEqual(['refused:INVALID_REQUEST', 'refused:UNSUPPORTED_MEDIA_TYPE']);
      }
  });
});

/** Runs `count` calls one after the other (n = 0..count-1). */
async function sequentially<T>(count: number, call: (n: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let n = 0; n < count; n++) out.push(await call(n));
  return out;
}

type Send = (client: ClientId, account: AccountId, kind: Kind, replica: number) => Promise<Sent>;

/** Each client reads its plan once per account (billable, cached for every replica). */
async function warmUp(send: Send): Promise<void> {
  for (const client of CLIENTS)
    for (const account of ACCOUNTS) expect((await send(client, account, 'valid', 0)).status).toBe(200);
  for (const client of CLIENTS)
    for (const [i, account] of ACCOUNTS.entries()) {
      expect((await send(client, account, 'first-read', i)).status).toBe(200);
    }
  await sleep(300); // the cache write is not awaited by the request: let it land
}

/**
 * Both clients, both accounts, all replicas at once: validations (valid, wrong check digit, failing 503),
 * unknown plans (404), invalid input (400), the wrong media type (415), and cached reads (one at a time per client).
 */
async function mixedLoad(send: Send, simulator: RunningSimulator): Promise<void> {
  simulator.setFaults({ failIds: [FAILING_DOC.document.id], errorStatus: 503 });
  const kinds: Kind[] = [
    'valid',
    'wrong',
    'unknown-plan',
    'invalid',
    'unsupported',
    'valid',
    'unknown-plan',
    'failing',
  ];
  // Every kind on both accounts: the account turns with each pass over the kinds.
  const worker = (client: ClientId, w: number) =>
    sequentially(40, (n) => {
      const account = ACCOUNTS[(Math.floor(n / kinds.length) + w) % 2] as AccountId;
      return send(client, account, kinds[(n + w) % kinds.length] as Kind, n + w);
    });
  const cachedReader = (client: ClientId) =>
    sequentially(40, (n) => send(client, ACCOUNTS[n % 2] as AccountId, 'cached', n));
  await Promise.all(
    CLIENTS.flatMap((client) => [cachedReader(client), ...[0, 1, 2, 3].map((w) => worker(client, w))]),
  );
  simulator.setFaults({});
}

/** Many identical reads of one unknown plan at once on every replica and account, the provider slowed down. */
async function coalescedReads(send: Send, simulator: RunningSimulator): Promise<void> {
  simulator.setFaults({ latencyMs: 1_500 });
  COALESCED_PLAN = randomUUID();
  await Promise.all(
    [0, 1, 2].flatMap((replica) =>
      ACCOUNTS.flatMap((account) =>
        CLIENTS.flatMap((client) => [0, 1, 2, 3].map(() => send(client, account, 'coalesce', replica))),
      ),
    ),
  );
  simulator.setFaults({});
}

/** Every token revoked: each replica's next call gets 401, renews its token and retries once. */
async function afterRevocation(send: Send, simulator: RunningSimulator): Promise<void> {
  simulator.revokeTokens();
  for (const replica of [0, 1, 2])
    await Promise.all(
      CLIENTS.flatMap((client) => ACCOUNTS.map((account) => send(client, account, 'after-revoke', replica))),
    );
}

function requestOf(
  kind: Kind,
  client: ClientId,
): { path: string; init: RequestInit & { headers: Record<string, string> } } {
  const post = (body: unknown, type = 'application/json') => ({
    path: '/api/validation/document',
    init: { method: 'POST', headers: { 'content-type': type }, body: JSON.stringify(body) },
  });
  const get = (id: string) => ({
    path: `/api/subscriptions/plan/${id}`,
    init: { method: 'GET', headers: {} },
  });
  switch (kind) {
    case 'first-read':
    case 'cached':
      return get(CACHED_PLAN[client]);
    case 'coalesce':
      return get(COALESCED_PLAN);
    case 'unknown-plan':
      return get(randomUUID());
    case 'invalid':
      return post({ country: 'argentina', document: { id: '1', type: 'CUIT' } });
    case 'unsupported':
      return post(VALID_DOC, 'text/plain');
    case 'wrong':
      return post(WRONG_DOC);
    case 'failing':
      return post(FAILING_DOC);
    case 'rejected':
      return post(REJECTED_DOC);
    default:
      return post(VALID_DOC);
  }
}

/** The provider's count per client (from the request id) and account (the username of the token). */
function providerCounts(answers: readonly OperationAnswer[]): Record<string, Counts> {
  const out: Record<string, Counts> = {};
  for (const answer of answers) {
    const client = answer.requestId?.split('-')[0] ?? 'none';
    const name = `${client}/${answer.account ?? 'none'}`;
    out[name] ??= {};
    const row = out[name];
    const add = (column: string) => {
      row[column] = (row[column] ?? 0) + 1;
    };
    add(classOf(answer.status));
    if (isBillable(answer.status)) add('billable');
    if (answer.status === 401) add('unauthorized');
  }
  return out;
}

function totalsOf(report: {
  totals: { client: string; account: string; counts: Counts }[];
}): Record<string, Counts> {
  return Object.fromEntries(report.totals.map((t) => [`${t.client}/${t.account}`, t.counts]));
}

function summary(all: readonly Sent[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of all) {
    const name = `${s.client}/${s.account}/${s.kind}/${s.status}${s.reason ? ` ${s.reason}` : ''}`;
    out[name] = (out[name] ?? 0) + 1;
  }
  return out;
}

/** Accounts file, client registry and the gateway's environment (one Redis, one prefix, the plan cache on). */
function gatewayEnv(dir: string, simulator: RunningSimulator, redisUrl: string): Record<string, string> {
  const secret = (name: string, value: string) => {
    writeFileSync(join(dir, name), value);
    return join(dir, name);
  };
  const accountsFile = join(dir, 'accounts.json');
  writeFileSync(
    accountsFile,
    JSON.stringify({
      accounts: ACCOUNTS.map((id) => ({
        id,
        baseUrl: simulator.url,
        usernameFile: secret(`${id}-username`, USERNAMES[id]),
        passwordFile: secret(`${id}-password`, PASSWORDS[id]),
      })),
    }),
  );
  const generous = { limit: 1_000_000, windowSeconds: 60 };
  const clientsFile = writeClientsFile([
    // A quota far from reached: every provider call of this client goes through the reserve/commit path.
    {
      id: 'shop',
      keys: [KEYS.shop],
      scopes: ['documents:validate', 'plans:read'],
      rateLimit: generous,
      accounts: ['alpha', 'beta'],
      quota: { day: 100_000, timezone: 'America/Sao_Paulo' },
    },
    {
      id: 'billing',
      keys: [KEYS.billing],
      scopes: ['documents:validate', 'plans:read'],
      rateLimit: generous,
      accounts: ['beta', 'alpha'],
    },
  ]);
  return {
    UPSTREAM_ACCOUNTS_FILE: accountsFile,
    UPSTREAM_ALLOW_HTTP: 'true',
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: PREFIX,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    CLIENTS_FILE: clientsFile,
    PLAN_CACHE_TTL_SECONDS: '300',
    // The 503s are few, but a circuit opened by them would turn later calls into refusals: kept closed here.
    CIRCUIT_MINIMUM_CALLS: '100000',
    LOG_LEVEL: 'warn',
  };
}
