// A flood of bad credentials against two real gateway processes sharing a real Redis: refused cheaply, logged in
// aggregate, counted; valid callers from the same address keep passing; an issuer outage is not hammered.
import { Agent, request as httpRequest } from 'node:http';
import { startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { startTestIssuer, type TestIssuer } from '../unit/callers/support/oidc-test-issuer';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const KEY = 'pbk_system-flood-valid-key-AAAAAAAAAAAAAAAAAAAA';
const BAD_KEY = 'pbk_system-flood-wrong-key-BBBBBBBBBBBBBBBBBBBB';
const LIMIT = 6;

interface LogLine {
  msg: string;
  status?: number;
  clientIp?: string;
  failed?: number;
  refused?: number;
  unverified?: number;
}

describe('an unauthenticated flood against two gateway processes sharing Redis', () => {
  let redis: RedisServer;
  let simulator: Awaited<ReturnType<typeof startSimulator>>;
  let issuer: TestIssuer;
  let gateways: GatewayProcess[] = [];
  const agents: Agent[] = [];

  /** Requests over one keep-alive connection of their own to `gateway`. */
  const connection = (gateway: GatewayProcess) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(agent);
    return (headers: Record<string, string> = {}) =>
      new Promise<{ status: number; retryAfter?: string }>((resolve, reject) => {
        httpRequest({ host: '127.0.0.1', port: gateway.port, path: PLAN, agent, headers }, (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string }),
          );
        })
          .on('error', reject)
          .end();
      });
  };
  const logLines = (gateway: GatewayProcess): LogLine[] =>
    gateway
      .logs()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as LogLine);
  const rejections = async (gateway: GatewayProcess) => {
    const text = await (await fetch(`${gateway.url}/metrics`)).text();
    const line =
      /^rate_limit_rejections_total\{(?=[^}]*client="anonymous")(?=[^}]*reason="auth-failures")[^}]*\} (\d+)/m.exec(
        text,
      );
    return Number(line?.[1] ?? 0);
  };

  beforeAll(async () => {
    [redis, simulator, issuer] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0 }),
      startTestIssuer(),
    ]);
    const clientsFile = writeClientsFile([{ id: 'shop', keys: [KEY], scopes: ['plans:read'] }]);
    const env = {
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: 'sandbox-merchant',
      UPSTREAM_PASSWORD: 'sandbox-password',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `bff-flood-${Date.now()}:`,
      CLIENTS_FILE: clientsFile,
      OIDC_ISSUER: issuer.issuer,
      OIDC_AUDIENCE: 'payments-bff',
      OIDC_JWKS_URL: issuer.jwksUrl,
      AUTH_FAILURE_LIMIT: String(LIMIT),
      AUTH_FAILURE_WINDOW_SECONDS: '120',
    };
    gateways = await Promise.all([startGatewayProcess({ env }), startGatewayProcess({ env })]);
  }, 60_000);

  afterAll(async () => {
    for (const agent of agents) agent.destroy();
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close(), issuer?.close()]);
  });

  test('the fleet counts failures from one IP as one: 401 up to the limit, then 429 with Retry-After', async () => {
    const [a, b] = gateways.map(connection) as [ReturnType<typeof connection>, ReturnType<typeof connection>];
    const answers = [];
    for (let i = 0; i < 20; i++) answers.push(await (i % 2 === 0 ? a : b)({ 'x-api-key': BAD_KEY }));
    expect(answers.map((answer) => answer.status)).toEqual([
      ...Array(LIMIT).fill(401),
      ...Array(20 - LIMIT).fill(429),
    ]);
    expect(Number(answers.at(-1)?.retryAfter)).toBeGreaterThan(100);
    expect((await rejections(gateways[0]!)) + (await rejections(gateways[1]!))).toBe(20 - LIMIT);
    // Requests with no credential at all are refused too.
    expect((await a()).status).toBe(429);
  });

  test('a valid key from the same IP still passes on both replicas', async () => {
    for (const gateway of gateways) {
      const valid = connection(gateway);
      expect((await valid({ 'x-api-key': KEY })).status).toBe(200);
      expect((await valid({ 'x-api-key': KEY })).status).toBe(200);
    }
  });

  test('an issuer that fails is asked at most once per replica by a burst of bearer requests', async () => {
    issuer.failWith = 503;
    const token = await issuer.sign({ aud: 'payments-bff', azp: 'intranet-web', scope: 'plans:read' });
    const statuses: number[] = [];
    for (const gateway of gateways) {
      const sso = connection(gateway);
      const burst = await Promise.all(
        Array.from({ length: 15 }, () => sso({ authorization: `Bearer ${token}` })),
      );
      statuses.push(...burst.map((answer) => answer.status));
    }
    // Verified (each on its own connection), failed for the outage, and not counted against the address.
    expect(new Set(statuses)).toEqual(new Set([401]));
    expect(issuer.jwksFetches).toBeLessThanOrEqual(2);
    issuer.failWith = undefined;
  });

  test('logs: request lines carry the client IP; failures make one aggregated line per IP, not one per request', async () => {
    await Promise.all(gateways.map((g) => g.stop())); // shutdown writes the last interval's counts
    const tallies = { failed: 0, refused: 0 };
    for (const gateway of gateways) {
      const lines = logLines(gateway);
      const requests = lines.filter((line) => line.msg === 'request');
      expect(requests.length).toBeGreaterThan(0);
      for (const line of requests) expect(line.clientIp).toBe('127.0.0.1');
      expect(requests.filter((line) => line.status === 401 || line.status === 429)).toEqual([]);
      const aggregated = lines.filter((line) => line.msg === 'failed authentications');
      expect(aggregated).toHaveLength(1);
      expect(aggregated[0]!.clientIp).toBe('127.0.0.1');
      expect(aggregated[0]!.unverified).toBe(15); // the bearer burst during the issuer outage
      tallies.failed += aggregated[0]!.failed ?? 0;
      tallies.refused += aggregated[0]!.refused ?? 0;
      expect(lines.filter((line) => line.msg.startsWith('client IP blocked'))).toHaveLength(1);
      expect(lines.filter((line) => line.msg === 'OIDC issuer keys unavailable')).toHaveLength(1);
      expect(gateway.logs()).not.toContain(BAD_KEY);
    }
    // 8 credentials were checked and wrong (the limit, then the one on each replica that found the block);
    // 14 + 1 answers were 429, the last 12 + 1 of them with nothing verified.
    expect(tallies).toEqual({ failed: LIMIT + 2, refused: 20 - LIMIT + 1 });
  });
});
