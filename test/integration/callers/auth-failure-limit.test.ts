// Failed authentications counted per client IP in a real Redis shared by two replicas: a flood is refused 429 with
// nothing hashed or verified, while valid callers from the same IP keep passing.
import { Agent, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { authFailureLimit } from '../../../src/callers/auth-failure-limit';
import { authenticate } from '../../../src/callers/authenticate';
import { loadClientRegistry } from '../../../src/callers/client-registry';
import { createOidcVerifier, type OidcVerifier } from '../../../src/callers/oidc-verifier';
import { createAuthFailureLog } from '../../../src/observability/auth-failure-log';
import { createMetrics } from '../../../src/observability/metrics';
import { createRedisClient, type RedisClient } from '../../../src/store/redis-connection';
import { writeClientsFile } from '../../support/clients-file';
import { waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { startTestIssuer, type TestIssuer } from '../../unit/callers/support/oidc-test-issuer';
import { memoryLogger, testApp } from '../../unit/callers/support/test-app';

const KEY = 'pbk_flood-test-valid-key-0123456789AB';
const OTHER_KEY = 'pbk_flood-test-other-key-0123456789AB';
const BAD_KEY = 'pbk_flood-test-wrong-key-0123456789AB';
const AUDIENCE = 'payments-bff';
const LIMIT = 5;
const clientsFile = writeClientsFile([
  { id: 'checkout', keys: [KEY], scopes: ['plans:read'] },
  { id: 'reporting', keys: [OTHER_KEY], scopes: ['plans:read'] },
]);
const registry = loadClientRegistry(clientsFile, { logger: memoryLogger(), watch: false });

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: { status?: { description: string }; caller?: { id: string } | null };
}

/** One keep-alive connection (an agent with one socket) to `port`. */
function connection(port: number, agents: Agent[]) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  agents.push(agent);
  return (headers: Record<string, string> = {}) =>
    new Promise<Answer>((resolve, reject) => {
      httpRequest({ host: '127.0.0.1', port, path: '/x', agent, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) }),
        );
      })
        .on('error', reject)
        .end();
    });
}

describe('failed authentications per client IP, through a real Redis shared by two replicas', () => {
  let redis: RedisServer;
  let issuer: TestIssuer;
  const clients: RedisClient[] = [];
  const servers: Server[] = [];
  const agents: Agent[] = [];
  let prefix = 0;

  beforeAll(async () => {
    [redis, issuer] = await Promise.all([startRedisServer(), startTestIssuer()]);
  });
  afterAll(async () => {
    for (const agent of agents) agent.destroy();
    for (const server of servers) server.closeAllConnections();
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    for (const client of clients) client.disconnect();
    await Promise.all([redis.stop(), issuer.close()]);
  });

  /** A fleet of replicas sharing one Redis prefix, each counting its (hashing) key lookups and token checks. */
  async function fleet(size: number, settings: { trustProxy?: boolean; limit?: number } = {}) {
    const keyPrefix = `bff-flood-${++prefix}:`;
    return Promise.all(
      Array.from({ length: size }, async () => {
        const client = createRedisClient({
          topology: { kind: 'standalone', url: redis.url },
          tls: false,
          keyPrefix,
          allowMemoryStore: false,
        })!;
        clients.push(client);
        await waitFor(() => client.status === 'ready', { what: 'redis ready' });
        const metrics = createMetrics();
        const logger = memoryLogger();
        const failureLog = createAuthFailureLog({ logger, intervalMs: 3_600_000 });
        const counted = { lookups: 0, verifications: 0 };
        const countingRegistry = {
          findById: registry.findById,
          findByApiKey: (key: string) => {
            counted.lookups++;
            return registry.findByApiKey(key);
          },
        };
        const verifier = createOidcVerifier({
          issuer: issuer.issuer,
          audience: AUDIENCE,
          jwksUrl: issuer.jwksUrl,
          clockToleranceSeconds: 0,
        });
        const countingVerifier: OidcVerifier = {
          verify: (token) => {
            counted.verifications++;
            return verifier.verify(token);
          },
        };
        // The clock of the per-connection re-check, moved by hand: a slow machine never changes what is counted.
        const clock = { now: Date.now() };
        const app = testApp(
          authenticate({
            now: () => clock.now,
            registry: countingRegistry,
            oidc: countingVerifier,
            failures: authFailureLimit({
              redis: client,
              keyPrefix,
              limit: settings.limit ?? LIMIT,
              windowSeconds: 60,
              metrics,
              logger,
              failureLog,
            }),
          }),
        );
        if (settings.trustProxy) app.set('trust proxy', true);
        const server: Server = await new Promise((resolve) => {
          const s = app.listen(0, '127.0.0.1', () => resolve(s));
        });
        servers.push(server);
        const { port } = server.address() as AddressInfo;
        const rejections = async () =>
          (await metrics.rateLimitRejections.get()).values.find((v) => v.labels.reason === 'auth-failures')
            ?.value ?? 0;
        const fallbacks = async () => (await metrics.rateLimitFallbacks.get()).values[0]?.value ?? 0;
        return {
          counted,
          logger,
          fallbacks,
          failureLog,
          rejections,
          clock,
          connect: () => connection(port, agents),
          client,
        };
      }),
    );
  }

  test('a flood from one IP spread over two replicas is refused 429 past the fleet-wide limit', async () => {
    const [a, b] = await fleet(2);
    const floodA = a!.connect();
    const floodB = b!.connect();
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT; i++)
      statuses.push((await (i % 2 === 0 ? floodA : floodB)({ 'x-api-key': BAD_KEY })).status);
    expect(statuses).toEqual(Array(LIMIT).fill(401));

    // The sixth failure of the fleet, on either replica, is past the limit.
    const refused = await floodB({ 'x-api-key': BAD_KEY });
    expect(refused.status).toBe(429);
    expect(refused.body.status?.description).toBe('RATE_LIMITED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(50);
    expect(refused.headers['ratelimit-policy']).toBe(`${LIMIT};w=60`);
    expect(refused.headers.ratelimit).toMatch(/remaining=0,/);
    // Replica A learns it at its own next failure from that IP (it asks Redis, which says past the limit).
    expect((await floodA({ 'x-api-key': BAD_KEY })).status).toBe(429);
    expect(await a!.client.keys('*authfail*')).toEqual([expect.stringMatching(/authfail:60:127\.0\.0\.1$/)]);
    // No answer ever repeats the key.
    expect(JSON.stringify(refused)).not.toContain(BAD_KEY);
  });

  test('the flood costs nothing once blocked: no key hashed, no token verified, no Redis call', async () => {
    const [a] = await fleet(1);
    const flood = a!.connect();
    for (let i = 0; i < LIMIT; i++) await flood({ 'x-api-key': `${BAD_KEY}${i}` });
    expect((await flood({ 'x-api-key': BAD_KEY })).status).toBe(429);
    const lookupsAtBlock = a!.counted.lookups;
    const redisCalls = Number((await a!.client.info('stats')).match(/total_commands_processed:(\d+)/)![1]);

    const statuses: number[] = [];
    for (let i = 0; i < 50; i++) {
      statuses.push((await flood({ 'x-api-key': `${BAD_KEY}-${i}` })).status);
      statuses.push((await flood({ authorization: `Bearer ${await issuer.sign({ aud: 'other' })}` })).status);
      statuses.push((await flood()).status);
      statuses.push((await flood({ authorization: 'Basic dXNlcjpwYXNz' })).status);
    }
    expect(statuses).toEqual(Array(200).fill(429));
    expect(a!.counted.lookups).toBe(lookupsAtBlock);
    expect(a!.counted.verifications).toBe(0);
    const redisCallsAfter = Number(
      (await a!.client.info('stats')).match(/total_commands_processed:(\d+)/)![1],
    );
    expect(redisCallsAfter - redisCalls).toBeLessThanOrEqual(1); // the INFO call itself
    expect(await a!.rejections()).toBe(201);
  });

  test('valid callers behind the blocked IP still pass, with a key or a token', async () => {
    const [a, b] = await fleet(2);
    const valid = a!.connect();
    expect((await valid({ 'x-api-key': KEY })).status).toBe(200); // before the flood
    const flood = a!.connect();
    for (let i = 0; i <= LIMIT; i++) await flood({ 'x-api-key': BAD_KEY });
    expect((await flood({ 'x-api-key': BAD_KEY })).status).toBe(429);

    // The connection that already presented the key: not even hashed again.
    const lookups = a!.counted.lookups;
    for (let i = 0; i < 5; i++) expect((await valid({ 'x-api-key': KEY })).status).toBe(200);
    expect(a!.counted.lookups).toBe(lookups);
    // A caller on a new connection, with a key never seen before on either replica, is verified and passes.
    const fresh = a!.connect();
    const answer = await fresh({ 'x-api-key': OTHER_KEY });
    expect(answer.status).toBe(200);
    expect(answer.body.caller).toEqual({ id: 'reporting', via: 'api-key' });
    expect((await b!.connect()({ 'x-api-key': KEY })).status).toBe(200);
    // An SSO caller too.
    const token = await issuer.sign({ aud: AUDIENCE, azp: 'intranet-web', scope: 'plans:read' });
    const sso = b!.connect();
    expect((await sso({ authorization: `Bearer ${token}` })).status).toBe(200);
    expect((await sso({ authorization: `Bearer ${token}` })).status).toBe(200);
    // ...while the flood's connection stays refused, even for a token that would have verified: the price of
    // sharing a connection with failed credentials (a new connection is verified).
    expect((await flood({ authorization: `Bearer ${token}` })).status).toBe(429);
  });

  test('a caller that fixed its own key is verified again on the same connection a second after its last failure', async () => {
    const [a] = await fleet(1);
    const own = a!.connect();
    for (let i = 0; i <= LIMIT; i++) await own({ 'x-api-key': BAD_KEY });
    const lookups = a!.counted.lookups;
    expect((await own({ 'x-api-key': KEY })).status).toBe(429); // within the second: not even hashed
    expect(a!.counted.lookups).toBe(lookups);
    a!.clock.now += 1_000;
    expect((await own({ 'x-api-key': KEY })).status).toBe(200);
    expect((await own({ 'x-api-key': KEY })).status).toBe(200); // remembered now
    expect(a!.counted.lookups).toBe(lookups + 1);
    // The flood on a connection: one verification per second, each failure starting the second again.
    const flood = a!.connect();
    await flood({ 'x-api-key': BAD_KEY });
    for (let second = 0; second < 3; second++) {
      for (let i = 0; i < 10; i++) expect((await flood({ 'x-api-key': BAD_KEY })).status).toBe(429);
      a!.clock.now += 1_000;
    }
    // The fixed key, the flood's first request on its new connection, one in each of the two later seconds.
    expect(a!.counted.lookups).toBe(lookups + 1 + 1 + 2);
  });

  test('a blocked IP verifies one credential per new connection: a flood over new connections costs one each', async () => {
    const [a] = await fleet(1);
    const first = a!.connect();
    for (let i = 0; i <= LIMIT; i++) await first({ 'x-api-key': BAD_KEY });
    const lookups = a!.counted.lookups;
    for (let c = 0; c < 4; c++) {
      const flood = a!.connect();
      for (let i = 0; i < 10; i++) expect((await flood({ 'x-api-key': BAD_KEY })).status).toBe(429);
    }
    expect(a!.counted.lookups - lookups).toBe(4);
  });

  test('behind a trusted proxy the count is per forwarded client IP; without trust, X-Forwarded-For changes nothing', async () => {
    const [proxied] = await fleet(1, { trustProxy: true });
    const viaProxy = proxied!.connect();
    for (let i = 0; i <= LIMIT; i++)
      await viaProxy({ 'x-api-key': BAD_KEY, 'x-forwarded-for': '203.0.113.7' });
    expect((await viaProxy({ 'x-forwarded-for': '203.0.113.7' })).status).toBe(429);
    expect((await viaProxy({ 'x-forwarded-for': '198.51.100.9' })).status).toBe(401); // another client
    // The proxy's shared connection: a valid key for another client IP is verified.
    expect((await viaProxy({ 'x-api-key': KEY, 'x-forwarded-for': '198.51.100.9' })).status).toBe(200);

    const [direct] = await fleet(1);
    const spoofing = direct!.connect();
    for (let i = 0; i <= LIMIT; i++)
      await spoofing({ 'x-api-key': BAD_KEY, 'x-forwarded-for': `192.0.2.${i}` });
    expect((await spoofing({ 'x-forwarded-for': '192.0.2.200' })).status).toBe(429);
  });

  test('an issuer outage is not counted against the callers', async () => {
    const [a] = await fleet(1, { limit: 2 });
    const sso = a!.connect();
    issuer.failWith = 503;
    try {
      const token = await issuer.sign({ aud: AUDIENCE, azp: 'intranet-web', scope: 'plans:read' });
      for (let i = 0; i < 6; i++) expect((await sso({ authorization: `Bearer ${token}` })).status).toBe(401);
    } finally {
      issuer.failWith = undefined;
    }
    expect(await a!.rejections()).toBe(0);
    a!.failureLog.flush();
    const lines = a!.logger.lines.filter((l) => l.message === 'failed authentications');
    expect(lines.map((l) => l.fields)).toEqual([
      expect.objectContaining({ clientIp: '127.0.0.1', failed: 0, refused: 0, unverified: 6 }),
    ]);
  });

  test('failures are logged as one line per IP with counts, and the block once', async () => {
    const [a] = await fleet(1);
    const flood = a!.connect();
    for (let i = 0; i < LIMIT + 10; i++) await flood({ 'x-api-key': BAD_KEY });
    a!.failureLog.flush();
    const lines = a!.logger.lines.filter((l) => l.message.startsWith('failed authentications'));
    expect(lines).toEqual([
      {
        level: 'warn',
        message: 'failed authentications',
        fields: expect.objectContaining({
          clientIp: '127.0.0.1',
          failed: LIMIT + 1,
          refused: 10,
          unverified: 0,
        }),
      },
    ]);
    const blocks = a!.logger.lines.filter((l) => l.message.startsWith('client IP blocked'));
    expect(blocks).toHaveLength(1);
    expect(JSON.stringify(a!.logger.lines)).not.toContain(BAD_KEY);
  });

  test('Redis down: failures are counted in replica memory and the flood is still refused, never a 500', async () => {
    const [a] = await fleet(1);
    await redis.kill();
    try {
      const flood = a!.connect();
      const statuses: number[] = [];
      for (let i = 0; i < LIMIT + 3; i++) statuses.push((await flood({ 'x-api-key': BAD_KEY })).status);
      expect(statuses).toEqual([...Array(LIMIT).fill(401), 429, 429, 429]);
      // Decided in memory, counted; the outage's line is the Redis-health owner's, none of the limiter's.
      expect(await a!.fallbacks()).toBeGreaterThanOrEqual(LIMIT);
      expect(a!.logger.lines.filter((l) => /redis/i.test(l.message))).toEqual([]);
      expect((await a!.connect()({ 'x-api-key': KEY })).status).toBe(200);
    } finally {
      await redis.restart();
      await waitFor(() => a!.client.status === 'ready', { what: 'reconnect', timeoutMs: 15_000 });
    }
  });
});
