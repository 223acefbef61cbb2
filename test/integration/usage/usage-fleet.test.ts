// Quotas and the usage ledger against a real redis-server, with several instances standing for replicas: the fleet
// limit, Retry-After to midnight in the client's timezone, an exact ledger after a graceful stop, a SIGKILLed
// replica's loss, a webhook that fails or hangs, and the Redis commands they cost.
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRedisClient, type RedisClient } from '../../../src/store/redis-connection';
import { createUsage, periodAt, readUsage, type Usage, usageLedgerStore } from '../../../src/usage';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { sleep, waitReady } from '../tokens/fleet-harness';

let server: RedisServer;
const clients: RedisClient[] = [];

async function connect(): Promise<RedisClient> {
  const client = createRedisClient({
    topology: { kind: 'standalone', url: server.url },
    tls: false,
    keyPrefix: 'u:',
    allowMemoryStore: false,
  }) as RedisClient;
  client.on('error', () => undefined);
  clients.push(client);
  await waitReady(client);
  return client;
}

/** Every command Redis has run (INFO commandstats counts those run inside scripts too). */
async function commandsRun(redis: RedisClient): Promise<number> {
  const info = await redis.info('commandstats');
  return [...info.matchAll(/calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
}

function lines() {
  const seen: { fields: Record<string, unknown>; message: string }[] = [];
  const log = (fields: Record<string, unknown>, message: string) => void seen.push({ fields, message });
  return { seen, logger: { info: log, warn: log } };
}

beforeAll(async () => {
  server = await startRedisServer();
});

afterAll(async () => {
  for (const client of clients) client.disconnect();
  await server.stop();
});

test('a day quota of 200 across three replicas: 200-203 granted, then 429 to midnight in Sao Paulo; the ledger exact after a graceful stop; a failing webhook blocks nothing', async () => {
  let hookCalls = 0;
  const hook: Server = createServer((req, res) => {
    hookCalls += 1;
    req.resume();
    req.on('end', () => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
  const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  const { seen, logger } = lines();
  const replicas: Usage[] = [];
  for (let i = 0; i < 3; i++)
    replicas.push(
      createUsage({
        redis: await connect(),
        keyPrefix: 'u:',
        settings: { retentionDays: 400, webhook: { url: hookUrl, secret: 'a-long-enough-webhook-key' } },
        limitsOf: (client) =>
          client === 'batch-job' ? { day: 200, timeZone: 'America/Sao_Paulo' } : undefined,
        logger,
      }),
    );
  let granted = 0;
  const refusals: number[] = [];
  let slowest = 0;
  await Promise.all(
    Array.from({ length: 30 }, async (_, worker) => {
      for (let i = 0; i < 30; i++) {
        const replica = replicas[(worker + i) % 3] as Usage;
        const decision = await replica.quotas.reserve('batch-job', 'default');
        if (decision.allowed) {
          granted += 1;
          await sleep(1); // the provider's answer
          const started = performance.now();
          replica.ledger.record('batch-job', 'default', 'validateDocument', 'answers2xx');
          replica.ledger.record('batch-job', 'default', 'validateDocument', 'billable');
          decision.reservation.commit();
          slowest = Math.max(slowest, performance.now() - started);
        } else {
          // Where Retry-After points, as seen when the refusal was made, against midnight in Sao Paulo.
          const midnight = periodAt('day', Date.now(), 'America/Sao_Paulo').endsAt;
          expect(decision.refusal.resetsAt).toBe(midnight);
          refusals.push(Date.now() + decision.refusal.retryAfterSeconds * 1000 - midnight);
          replica.ledger.record('batch-job', 'default', 'validateDocument', 'refused:QUOTA_EXCEEDED');
        }
      }
    }),
  );
  expect(granted).toBeGreaterThanOrEqual(200);
  expect(granted).toBeLessThanOrEqual(203);
  expect(refusals).toHaveLength(900 - granted);
  // Whole seconds rounded up: Retry-After never ends before midnight there, and at most a second after it (plus the
  // moment between the refusal and this test reading the clock, on a loaded machine).
  for (const offsetMs of refusals) expect(offsetMs >= 0 && offsetMs <= 2_000).toBe(true);
  // Settling a call (with warnings being sent to a failing webhook meanwhile) stays a matter of microseconds.
  expect(slowest).toBeLessThan(50);

  await Promise.all(replicas.map((r) => r.close()));
  const report = await readUsage(usageLedgerStore(clients[0] as RedisClient, 'u:'), {
    from: new Date().toISOString().slice(0, 10),
    to: new Date().toISOString().slice(0, 10),
  });
  expect(report.totals).toEqual([
    {
      client: 'batch-job',
      account: 'default',
      counts: { answers2xx: granted, billable: granted, 'refused:QUOTA_EXCEEDED': 900 - granted },
    },
  ]);
  // One warning line per threshold for the whole fleet, each also sent to the webhook (which answers 500).
  const warnings = seen.filter((l) => l.fields.event === 'quota_threshold').map((l) => l.fields.threshold);
  expect(warnings.sort()).toEqual([100, 80]);
  expect(hookCalls).toBeGreaterThanOrEqual(1);
  hook.close();
  hook.closeAllConnections();
}, 30_000);

/** Runs ~150 requests every 50 ms (about 3,000 req/s) spread over `replicas` for `seconds`; the requests made. */
async function steadyLoad(replicas: Usage[], clientsCount: number, seconds: number): Promise<number> {
  let requests = 0;
  for (let tick = 0; tick < seconds * 20; tick++) {
    for (let i = 0; i < 150; i++) {
      const replica = replicas[i % replicas.length] as Usage;
      const client = `app-${i % clientsCount}`;
      const operation = i % 2 ? 'getPlan' : 'validateDocument';
      const decision = await replica.quotas.reserve(client, 'default');
      if (decision.allowed) decision.reservation.commit();
      replica.ledger.record(client, 'default', operation, 'billable');
      replica.ledger.record(client, 'default', operation, 'answers2xx');
      requests += 1;
    }
    await sleep(50);
  }
  return requests;
}

// The cost is one HSET a second per replica (the ledger) plus one claim (EVALSHA + an INCRBY per period, and HSET,
// HGETALL, PEXPIRE of the replicas seen) per client, account and replica about every 15 s: the bench's single replica
// stays far below 1 per 1,000; three replicas sharing the same 3,000 req/s pay three ledger writes a second (1 per
// 1,000) plus the claims (measured 2.0 before the replicas were counted, 3.0 after).
test.each([
  [1, 2, 1],
  [3, 5, 3.5],
])(
  'steady state, %i replica(s), %i clients with day and month quotas: Redis commands per 1,000 requests below %d',
  async (replicaCount, clientsCount, budget) => {
    const { logger } = lines();
    const prefix = `steady${replicaCount}:`;
    const replicas: Usage[] = [];
    for (let i = 0; i < replicaCount; i++)
      replicas.push(
        createUsage({
          redis: await connect(),
          keyPrefix: prefix,
          settings: { retentionDays: 400 },
          limitsOf: () => ({ day: 50_000_000, month: 1_000_000_000, timeZone: 'UTC' }),
          logger,
        }),
      );
    const admin = await connect();
    await steadyLoad(replicas, clientsCount, 3); // warm-up: first leases, first ledger writes and their expiry
    const before = await commandsRun(admin);
    const started = Date.now();
    const requests = await steadyLoad(replicas, clientsCount, 15);
    const commands = (await commandsRun(admin)) - before - 1; // the INFO of `before`
    const perThousand = (commands / requests) * 1000;
    process.stdout.write(
      `usage+quota, ${replicaCount} replica(s), ${clientsCount} clients: ${commands} Redis commands for ${requests} requests ` +
        `(${Math.round(requests / ((Date.now() - started) / 1000))} req/s) = ${perThousand.toFixed(3)} per 1,000\n`,
    );
    expect(perThousand).toBeLessThan(budget);
    await Promise.all(replicas.map((r) => r.close()));
  },
  60_000,
);

test('a replica killed with SIGKILL loses at most about a second of counts', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/usage-recorder.ts'], {
    env: { PATH: process.env.PATH, REDIS_URL: server.url, PREFIX: 'u3:', PER_TICK: '20' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let recorded = 0;
  let ready = false;
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    for (const line of text.split('\n'))
      if (line === 'ready') ready = true;
      else if (/^\d+$/.test(line)) recorded = Number(line);
  });
  const deadline = Date.now() + 20_000;
  while (!ready && Date.now() < deadline) await sleep(20);
  await sleep(3_500);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  const atKill = recorded;
  const report = await readUsage(usageLedgerStore(clients[0] as RedisClient, 'u3:'), {
    from: new Date().toISOString().slice(0, 10),
    to: new Date().toISOString().slice(0, 10),
  });
  const written = report.totals[0]?.counts.billable ?? 0;
  const lost = atKill - written;
  const perSecond = atKill / 3.5;
  process.stdout.write(
    `SIGKILL: recorded ${atKill}, in the ledger ${written}, lost ${lost} (${(lost / perSecond).toFixed(2)} s of counts)\n`,
  );
  expect(written).toBeGreaterThan(0);
  expect(lost).toBeGreaterThanOrEqual(0);
  expect(lost).toBeLessThanOrEqual(perSecond * 1.25);
}, 40_000);
