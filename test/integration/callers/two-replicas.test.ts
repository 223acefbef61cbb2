// Two real gateway processes sharing one real Redis, in front of the simulator: who may call, and how often.
import { createHash } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSimulator } from '../../../src/simulator/simulator';
import { type GatewayProcess, startGatewayProcess } from '../../support/gateway-process';
import { waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { tempDir } from '../../support/temp-dir';
import { newSigningKey, startTestIssuer, type TestIssuer } from '../../unit/callers/support/oidc-test-issuer';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const AUDIENCE = 'payments-bff';
const JWKS_COOLDOWN_MS = 10_000;

const KEYS = {
  limited: 'pbk_integration-limited-key-AAAAAAAAAAAAAAAAAAAA',
  rotatingOld: 'pbk_integration-rotating-old-BBBBBBBBBBBBBBBBBBBB',
  rotatingNew: 'pbk_integration-rotating-new-CCCCCCCCCCCCCCCCCCCC',
  validatorOnly: 'pbk_integration-validator-DDDDDDDDDDDDDDDDDDDDDD',
  late: 'pbk_integration-late-client-EEEEEEEEEEEEEEEEEEEE',
  wrong: 'pbk_integration-wrong-key-FFFFFFFFFFFFFFFFFFFFFFFF',
};
const hash = (key: string) => `sha256:${createHash('sha256').update(key).digest('hex')}`;

const clients = [
  {
    id: 'limited',
    keys: [hash(KEYS.limited)],
    scopes: ['plans:read'],
    rateLimit: { limit: 10, windowSeconds: 60 },
  },
  { id: 'rotating', keys: [hash(KEYS.rotatingOld), hash(KEYS.rotatingNew)], scopes: ['plans:read'] },
  { id: 'validator-only', keys: [hash(KEYS.validatorOnly)], scopes: ['documents:validate'] },
];

describe('callers against two gateway replicas sharing Redis', () => {
  let redis: RedisServer;
  let simulator: Awaited<ReturnType<typeof startSimulator>>;
  let issuer: TestIssuer;
  let gateways: GatewayProcess[] = [];
  let clientsFile: string;
  /** Every answer (status line, headers, body) seen by the test, scanned for secrets at the end. */
  const answers: string[] = [];
  /** Every credential sent, which must appear in no log line and no answer. */
  const secrets = new Set<string>(Object.values(KEYS));

  const writeRegistry = (list: unknown[]) => {
    const next = `${clientsFile}.next`;
    writeFileSync(next, JSON.stringify({ clients: list }));
    renameSync(next, clientsFile);
  };

  async function call(gateway: GatewayProcess, headers: Record<string, string> = {}): Promise<Response> {
    const response = await fetch(gateway.url + PLAN, { headers });
    const body = await response.clone().text();
    answers.push(`${response.status} ${JSON.stringify([...response.headers])} ${body}`);
    return response;
  }
  const bearer = (token: string) => {
    secrets.add(token);
    secrets.add(token.split('.')[2]!);
    return { Authorization: `Bearer ${token}` };
  };
  const description = async (response: Response) =>
    ((await response.json()) as { status: { description: string } }).status.description;

  beforeAll(async () => {
    [redis, simulator, issuer] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0 }),
      startTestIssuer(),
    ]);
    clientsFile = join(tempDir('bff-replicas-'), 'clients.json');
    writeRegistry(clients);
    const env = {
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: 'sandbox-merchant',
      UPSTREAM_PASSWORD: 'sandbox-password',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `bff-${Date.now()}:`,
      CLIENTS_FILE: clientsFile,
      OIDC_ISSUER: issuer.issuer,
      OIDC_AUDIENCE: AUDIENCE,
      OIDC_JWKS_URL: issuer.jwksUrl,
      OIDC_CLOCK_TOLERANCE_SECONDS: '30',
      LOG_LEVEL: 'debug',
    };
    gateways = await Promise.all([startGatewayProcess({ env }), startGatewayProcess({ env })]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close(), issuer?.close()]);
  });

  test('no credential and a wrong key are 401 CLIENT_UNAUTHENTICATED on both replicas', async () => {
    for (const gateway of gateways) {
      const none = await call(gateway);
      expect(none.status).toBe(401);
      expect(await description(none)).toBe('CLIENT_UNAUTHENTICATED');
      const wrong = await call(gateway, { 'X-API-Key': KEYS.wrong });
      expect(wrong.status).toBe(401);
      expect(await description(wrong)).toBe('CLIENT_UNAUTHENTICATED');
    }
  });

  test('a key without the route scope is 403 CLIENT_FORBIDDEN', async () => {
    const response = await call(gateways[0]!, { 'X-API-Key': KEYS.validatorOnly });
    expect(response.status).toBe(403);
    expect(await description(response)).toBe('CLIENT_FORBIDDEN');
  });

  test('key rotation: the old and the new key of a client are both accepted', async () => {
    for (const key of [KEYS.rotatingOld, KEYS.rotatingNew]) {
      const response = await call(gateways[1]!, { 'X-API-Key': key });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ internalId: 'b8546575-5d4f-4a56-9e21-522d01cf5992' });
    }
  });

  test('SSO tokens: valid passes; expired, wrong audience and wrong signature are 401', async () => {
    const claims = { aud: AUDIENCE, azp: 'intranet-web', scope: 'plans:read' };
    expect((await call(gateways[0]!, bearer(await issuer.sign(claims)))).status).toBe(200);
    expect((await call(gateways[1]!, bearer(await issuer.sign(claims)))).status).toBe(200);
    const expired = await call(gateways[0]!, bearer(await issuer.sign(claims, { expiresInSeconds: -600 })));
    expect(expired.status).toBe(401);
    const audience = await call(gateways[0]!, bearer(await issuer.sign({ ...claims, aud: 'another-api' })));
    expect(audience.status).toBe(401);
    const impostor = await newSigningKey(issuer.keys[0]!.kid);
    const forged = await call(gateways[1]!, bearer(await issuer.sign(claims, { key: impostor })));
    expect(forged.status).toBe(401);
    const noScope = await call(
      gateways[1]!,
      bearer(await issuer.sign({ ...claims, scope: 'documents:validate' })),
    );
    expect(noScope.status).toBe(403);
  });

  test('a registry change is picked up by running processes without a restart', async () => {
    expect((await call(gateways[0]!, { 'X-API-Key': KEYS.late })).status).toBe(401);
    writeRegistry([...clients, { id: 'late', keys: [hash(KEYS.late)], scopes: ['plans:read'] }]);
    for (const gateway of gateways) {
      await waitFor(async () => (await call(gateway, { 'X-API-Key': KEYS.late })).status === 200, {
        what: 'registry reload',
        timeoutMs: 15_000,
        intervalMs: 200,
      });
    }
    expect(gateways.every((g) => g.logs().includes('client registry reloaded'))).toBe(true);
  });

  test('a 10/min limit is shared across both replicas: 16 requests spread over both -> 6 refused', async () => {
    const responses: Response[] = [];
    for (let i = 0; i < 16; i += 1)
      responses.push(await call(gateways[i % 2]!, { 'X-API-Key': KEYS.limited }));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
    const refused = responses.find((r) => r.status === 429)!;
    expect(await description(refused)).toBe('RATE_LIMITED');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.get('ratelimit')).toMatch(/remaining=0,/);
    expect(refused.headers.get('ratelimit-policy')).toBe('10;w=60');
  });

  test('SSO key rotation: a token signed with a newly published key is accepted', async () => {
    const claims = { aud: AUDIENCE, azp: 'intranet-web', scope: 'plans:read' };
    const next = await newSigningKey();
    issuer.keys = [next, ...issuer.keys];
    // The replicas cached the old JWKS; an unknown kid makes them refetch once jose's cooldown allows.
    const wait = issuer.lastJwksFetchAt + JWKS_COOLDOWN_MS + 200 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    for (const gateway of gateways) {
      expect((await call(gateway, bearer(await issuer.sign(claims, { key: next })))).status).toBe(200);
    }
    // The old key, still published, keeps working during the overlap.
    expect(
      (await call(gateways[0]!, bearer(await issuer.sign(claims, { key: issuer.keys[1]! })))).status,
    ).toBe(200);
  }, 30_000);

  test('Redis killed: answers keep coming (no 5xx) and the limiter fallback is counted', async () => {
    await redis.kill();
    const statuses: number[] = [];
    for (let i = 0; i < 12; i += 1)
      statuses.push((await call(gateways[i % 2]!, { 'X-API-Key': KEYS.rotatingNew })).status);
    expect(statuses).toEqual(Array(12).fill(200));
    for (const gateway of gateways) {
      const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
      const fallbacks = Number(/^rate_limit_store_fallbacks_total (\d+)/m.exec(metrics)?.[1] ?? 0);
      expect(fallbacks).toBeGreaterThanOrEqual(6);
      // One line per outage, the Redis-health owner's: the limiters and the token cache add none of their own.
      const down = 'redis unreachable: serving from memory, reconnecting';
      await waitFor(() => gateway.logs().includes(down), { what: 'the down line' });
      const redisWarnings = gateway
        .logs()
        .split('\n')
        .filter((line) => line.includes('"level":40') && /redis/i.test(line));
      // The pub/sub connection's own line stays: the owner does not watch that connection.
      expect(redisWarnings.filter((line) => !line.includes('token.store.subscriber_error'))).toEqual([
        expect.stringContaining(down),
      ]);
    }
  });

  test('no API key or token appears in any log line or answer', () => {
    const logs = gateways.map((g) => g.logs()).join('\n');
    expect(logs.length).toBeGreaterThan(0);
    const everything = `${logs}\n${answers.join('\n')}`;
    for (const secret of secrets) expect(everything.includes(secret) ? secret : 'absent').toBe('absent');
  });
});
