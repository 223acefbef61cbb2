// Idempotency-Key across a fleet (SPEC §13): three real gateway processes, one real Redis, the simulator made slow.
// Provider calls are counted from the simulator's log of requests as they arrived (before its injected latency).
import { randomBytes, randomInt } from 'node:crypto';
import { Redis } from 'ioredis';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import type { RedisClient } from '../../src/store/redis-connection';
import { readUsage, usageLedgerStore } from '../../src/usage';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type RedisServer, startRedisServer } from '../support/redis-server';

jest.setTimeout(180_000);

const USERNAME = 'idempotency-merchant';
const PASSWORD = `idempotency-${randomBytes(6).toString('hex')}`;
const KEYS = {
  checkout: `pbk_idem-checkout-${randomBytes(12).toString('hex')}`,
  mobile: `pbk_idem-mobile-${randomBytes(12).toString('hex')}`,
} as const;
const PREFIX = `idem-${Date.now()}:`;
/** The simulator holds every answer this long: the first request of a key is still out while its copies arrive. */
const LATENCY_MS = 2_000;

interface Answer {
  readonly status: number;
  readonly reason?: string;
  readonly text: string;
  readonly replayed: string | null;
  readonly retryAfter: string | null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** A body of its own per scenario: the simulator's log tells its calls apart by the document id. */
const bodyWith = (id: string) => JSON.stringify({ country: 'ARG', document: { id, type: 'DNI' } });
const freshId = () => String(randomInt(10_000_000, 99_999_999));

describe('Idempotency-Key over three replicas', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateways: GatewayProcess[] = [];
  let client: Redis;

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0, username: USERNAME, password: PASSWORD }),
    ]);
    const generous = { limit: 1_000_000, windowSeconds: 60 };
    const scopes = ['documents:validate'];
    const clientsFile = writeClientsFile([
      { id: 'checkout', keys: [KEYS.checkout], scopes, rateLimit: generous },
      { id: 'mobile', keys: [KEYS.mobile], scopes, rateLimit: generous },
    ]);
    const env = {
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: USERNAME,
      UPSTREAM_PASSWORD: PASSWORD,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: PREFIX,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CLIENTS_FILE: clientsFile,
      // The lease: 2 x (0 + 500 + 2 x 5000 + 500 + 5000) + 2000 ms = 34 s (docs/idempotency.md).
      UPSTREAM_TIMEOUT_MS: '5000',
      UPSTREAM_BUDGET_WAIT_MS: '0',
      UPSTREAM_QUEUE_TIMEOUT_MS: '500',
      TOKEN_LOCK_WAIT_MS: '500',
      LOG_LEVEL: 'info',
    };
    gateways = await Promise.all([1, 2, 3].map(() => startGatewayProcess({ env, startTimeoutMs: 60_000 })));
    client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    await client.connect();
    await setLatency(LATENCY_MS);
  }, 120_000);

  afterAll(async () => {
    client?.disconnect();
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  async function setLatency(latencyMs: number) {
    const res = await fetch(`${simulator.url}/__simulator/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ latencyMs }),
    });
    expect(res.status).toBe(200);
  }

  /** Validation calls that reached the provider with this document id. */
  async function providerCalls(id: string): Promise<number> {
    const received = (await (await fetch(`${simulator.url}/__simulator/requests`)).json()) as {
      path: string;
      body: { document?: { id?: string } } | null;
    }[];
    return received.filter((r) => r.path === '/api/validation/document' && r.body?.document?.id === id)
      .length;
  }

  async function send(
    gateway: GatewayProcess,
    options: { apiKey?: string; key?: string | string[]; body: string },
  ): Promise<Answer> {
    const headers = new Headers({
      'x-api-key': options.apiKey ?? KEYS.checkout,
      'content-type': 'application/json',
    });
    for (const key of typeof options.key === 'string' ? [options.key] : (options.key ?? []))
      headers.append('idempotency-key', key);
    const res = await fetch(`${gateway.url}/api/validation/document`, {
      method: 'POST',
      headers,
      body: options.body,
    });
    const text = await res.text();
    let reason: string | undefined;
    if (res.status >= 400)
      reason = (JSON.parse(text) as { status?: { description?: string } }).status?.description;
    return {
      status: res.status,
      reason,
      text,
      replayed: res.headers.get('idempotent-replayed'),
      retryAfter: res.headers.get('retry-after'),
    };
  }

  const idempotencyRecords = async () => (await client.keys(`${PREFIX}idem:*`)).length;
  const at = (i: number) => gateways[i % gateways.length] as GatewayProcess;

  test('30 concurrent copies of one keyed request spread over the replicas: 1 provider call, the rest 409 or the replay; 10 repeats replay it byte for byte; the ledger bills 1', async () => {
    const id = freshId();
    const key = `order-${randomBytes(8).toString('hex')}`;
    const copies = await Promise.all(
      Array.from({ length: 30 }, (_, i) => send(at(i), { key, body: bodyWith(id) })),
    );
    const first = copies.filter((a) => a.status === 200 && a.replayed === null);
    const busy = copies.filter((a) => a.status === 409);
    const replays = copies.filter((a) => a.status === 200 && a.replayed === 'true');
    expect(first).toHaveLength(1);
    expect(busy.length + replays.length).toBe(29);
    for (const b of busy) {
      expect(b.reason).toBe('IDEMPOTENCY_KEY_IN_USE');
      expect(Number(b.retryAfter)).toBeGreaterThan(0);
    }
    const original = (first[0] as Answer).text;
    for (const r of replays) expect(r.text).toBe(original);

    const repeats = await Promise.all(
      Array.from({ length: 10 }, (_, i) => send(at(i), { key, body: bodyWith(id) })),
    );
    for (const r of repeats) {
      expect(r.status).toBe(200);
      expect(r.replayed).toBe('true');
      expect(r.text).toBe(original);
    }
    expect(await providerCalls(id)).toBe(1);

    // The ledger: the replicas write it every second or so; wait (bounded) until every 409 is in it, then the one
    // provider call is the one billable call (replays are not counted at all).
    const today = new Date().toISOString().slice(0, 10);
    const ledger = usageLedgerStore(client as unknown as RedisClient, PREFIX);
    let counts: Record<string, number> = {};
    for (let i = 0; i < 100; i++) {
      const report = await readUsage(ledger, { from: today, to: today, client: 'checkout' });
      counts = (report.totals.find((t) => t.client === 'checkout')?.counts ?? {}) as Record<string, number>;
      if ((counts['refused:IDEMPOTENCY_KEY_IN_USE'] ?? 0) >= busy.length && (counts.billable ?? 0) >= 1)
        break;
      await sleep(100);
    }
    expect(counts['refused:IDEMPOTENCY_KEY_IN_USE'] ?? 0).toBe(busy.length);
    expect(counts.billable).toBe(1);

    // The metrics count the claim, the replays and the conflicts; the request log says `replayed`.
    const outcomes = { claimed: 0, replayed: 0, in_use: 0 };
    for (const gateway of gateways) {
      const text = await (await fetch(`${gateway.url}/metrics`)).text();
      for (const outcome of Object.keys(outcomes) as (keyof typeof outcomes)[]) {
        const line = new RegExp(
          `^idempotency_requests_total\\{[^}]*outcome="${outcome}"[^}]*\\} (\\d+)$`,
          'm',
        ).exec(text);
        outcomes[outcome] += Number(line?.[1] ?? 0);
      }
    }
    expect(outcomes).toEqual({ claimed: 1, replayed: replays.length + 10, in_use: busy.length });
    expect(gateways.some((g) => g.logs().includes('"replayed":true'))).toBe(true);
  });

  test('a keyed request costs at most 3 Redis commands (claim and keep; a replay: claim and one read); an unkeyed one none', async () => {
    const monitor = await client.monitor();
    const seen: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args.some((a) => a.startsWith(`${PREFIX}idem:`))) seen.push(args);
    });
    /** MONITOR lines come in order: once a marker command shows up, everything before it has. */
    const commandsOf = async (run: () => Promise<unknown>) => {
      seen.length = 0;
      await run();
      const marker = `${PREFIX}idem:marker-${randomBytes(4).toString('hex')}`;
      await client.exists(marker);
      for (let i = 0; i < 100 && !seen.some((c) => c.includes(marker)); i++) await sleep(20);
      return seen.filter((c) => !c.includes(marker)).map((c) => (c[0] as string).toLowerCase());
    };
    try {
      const id = freshId();
      const key = `cost-${randomBytes(8).toString('hex')}`;
      expect(await commandsOf(() => send(at(0), { key, body: bodyWith(id) }))).toEqual(['set', 'set']);
      expect(await commandsOf(() => send(at(1), { key, body: bodyWith(id) }))).toEqual(['set', 'get']);
      expect(await commandsOf(() => send(at(2), { body: bodyWith(freshId()) }))).toEqual([]);
    } finally {
      monitor.disconnect();
    }
  });

  test('the same key from two clients: two executions; the same key with another body: 422', async () => {
    const id = freshId();
    const key = `shared-${randomBytes(8).toString('hex')}`;
    const one = await send(at(0), { key, body: bodyWith(id) });
    const two = await send(at(1), { key, body: bodyWith(id), apiKey: KEYS.mobile });
    expect([one.status, two.status]).toEqual([200, 200]);
    expect([one.replayed, two.replayed]).toEqual([null, null]);
    expect(await providerCalls(id)).toBe(2);

    const other = await send(at(2), { key, body: bodyWith(freshId()) });
    expect(other.status).toBe(422);
    expect(other.reason).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  test('hostile keys: empty, 256 characters, control characters, unicode, several headers: 400, nothing kept', async () => {
    const before = await idempotencyRecords();
    const id = freshId();
    const hostile: (string | string[])[] = ['', 'x'.repeat(256), 'a\tb', 'clé', ['one', 'two']];
    for (const key of hostile) {
      const answer = await send(at(0), { key, body: bodyWith(id) });
      expect(answer.status).toBe(400);
      expect(answer.reason).toBe('INVALID_REQUEST');
    }
    expect(await idempotencyRecords()).toBe(before);
    expect(await providerCalls(id)).toBe(0);
  });

  test('a replica SIGKILLed while its keyed call is out: a retry on another replica gets 409 until the lease ends, then 504 UPSTREAM_OUTCOME_UNKNOWN, and never a second call', async () => {
    const id = freshId();
    const key = `killed-${randomBytes(8).toString('hex')}`;
    const victim = gateways[2] as GatewayProcess;
    const pending = send(victim, { key, body: bodyWith(id) }).catch(() => undefined);
    for (let i = 0; i < 100 && (await providerCalls(id)) === 0; i++) await sleep(20);
    expect(await providerCalls(id)).toBe(1);
    victim.child.kill('SIGKILL');
    await victim.exited;
    await pending;
    gateways = gateways.slice(0, 2);

    const answers: Answer[] = [];
    // Bounded: the lease is 34 s; a retry every 500 ms for at most 60 s.
    for (let i = 0; i < 120; i++) {
      const answer = await send(at(i), { key, body: bodyWith(id) });
      answers.push(answer);
      if (answer.status !== 409) break;
      expect(answer.reason).toBe('IDEMPOTENCY_KEY_IN_USE');
      await sleep(500);
    }
    const last = answers[answers.length - 1] as Answer;
    expect(answers.length).toBeGreaterThan(1);
    expect(last.status).toBe(504);
    expect(last.reason).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    expect((await send(at(1), { key, body: bodyWith(id) })).reason).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    expect(await providerCalls(id)).toBe(1);
  });

  test('Redis stopped: a keyed request is 503 IDEMPOTENCY_UNAVAILABLE with Retry-After, an unkeyed one is served', async () => {
    await setLatency(0);
    await redis.stop();
    const keyed = await send(at(0), {
      key: `down-${randomBytes(8).toString('hex')}`,
      body: bodyWith(freshId()),
    });
    expect(keyed.status).toBe(503);
    expect(keyed.reason).toBe('IDEMPOTENCY_UNAVAILABLE');
    expect(Number(keyed.retryAfter)).toBeGreaterThan(0);
    const unkeyed = await send(at(1), { body: bodyWith(freshId()) });
    expect(unkeyed.status).toBe(200);
  });
});
