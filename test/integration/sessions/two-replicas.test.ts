// Browser sessions on two real gateway processes sharing one Redis, against a real oidc-provider with rotating refresh
// tokens: sessions shared, logout everywhere, back-channel logout, forged logout tokens, altered records, revalidation.
import { createHash, randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import { generateKeyPair, SignJWT } from 'jose';
import {
  type DevIdentityProvider,
  type DevUser,
  startDevIdentityProvider,
} from '../../../src/dev-identity-provider/dev-identity-provider';
import { SESSION_COOKIE } from '../../../src/sessions/cookies';
import { startSimulator } from '../../../src/simulator/simulator';
import { type GatewayProcess, startGatewayProcess } from '../../support/gateway-process';
import { CookieJar, login, request } from '../../support/oidc-browser';
import { freePort, waitFor } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { devUser, sessionGatewayEnv, webAppClientsFile } from '../../support/session-gateway';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const ajax = { 'x-csrf': '1' };
const CLIENT_ID = 'web-app';
const CLIENT_SECRET = randomBytes(24).toString('base64url');
const REVALIDATE_SECONDS = 5;
const PREFIX = `bff-sessions-${Date.now()}:`;

const person = (sub: string, groups: string[]) => devUser(sub, groups, sub.toUpperCase());
const alice = person('alice', ['payments-ops']);
const bob = person('bob', []);
const carol = person('carol', ['payments-ops']);
const dave = person('dave', ['payments-ops']);

describe('browser sessions across two gateway replicas', () => {
  let redis: RedisServer;
  let redisClient: Redis;
  let simulator: Awaited<ReturnType<typeof startSimulator>>;
  let provider: DevIdentityProvider;
  let a: GatewayProcess;
  let b: GatewayProcess;

  const sessionCall = (gateway: GatewayProcess, jar: CookieJar, path = PLAN) =>
    request(jar, `${gateway.url}${path}`, { headers: ajax });

  beforeAll(async () => {
    const [portA, portB] = [await freePort(), await freePort()];
    const originA = `http://127.0.0.1:${portA}`;
    [redis, simulator, provider] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0 }),
      startDevIdentityProvider({
        users: [alice, bob, carol, dave],
        clients: [
          {
            clientId: CLIENT_ID,
            clientSecret: CLIENT_SECRET,
            origin: originA,
            // Delivered to the other replica: what it ends must end on the first one too.
            backchannelLogoutUri: `http://127.0.0.1:${portB}/bff/backchannel-logout`,
          },
        ],
        rotateRefreshTokens: true,
      }),
    ]);
    redisClient = new Redis(redis.url);
    const clientsFile = webAppClientsFile({
      id: CLIENT_ID,
      scopes: ['documents:validate', 'plans:read'],
      rateLimit: { limit: 100_000, windowSeconds: 60 },
      session: { claim: 'groups', grants: { 'payments-ops': ['documents:validate', 'plans:read'] } },
    });
    const env = {
      ...sessionGatewayEnv({
        simulatorUrl: simulator.url,
        clientsFile,
        issuer: provider.issuer,
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        publicUrl: originA,
      }),
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: PREFIX,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      SESSION_REVALIDATE_SECONDS: String(REVALIDATE_SECONDS),
    };
    [a, b] = await Promise.all([
      startGatewayProcess({ env: { ...env, PORT: String(portA) } }),
      startGatewayProcess({ env: { ...env, PORT: String(portB) } }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    redisClient?.disconnect();
    await Promise.all([redis?.stop(), simulator?.close(), provider?.close()]);
  });

  async function signIn(user: DevUser, jar = new CookieJar()): Promise<CookieJar> {
    const answer = await login(jar, a.url, user);
    expect(answer.status).toBe(303);
    // The cookie is host-only: both replicas sit on 127.0.0.1, as behind one load balancer.
    const id = jar.get(a.url, SESSION_COOKIE);
    if (!id) throw new Error('no session cookie');
    jar.set(b.url, SESSION_COOKIE, id);
    return jar;
  }

  test('a session made on one replica works on the other, and logging out on one ends it on both', async () => {
    const jar = await signIn(alice);
    expect((await sessionCall(b, jar)).status).toBe(200);
    expect((await sessionCall(a, jar)).status).toBe(200);
    const out = await request(jar, `${b.url}/bff/logout`, { method: 'POST', headers: ajax });
    expect(out.status).toBe(200);
    // The jar still holds the cookie for the first replica's address: the session itself is gone.
    expect(jar.get(a.url, SESSION_COOKIE)).toBeDefined();
    expect((await sessionCall(a, jar)).status).toBe(401);
  });

  test('logout on one replica: the same cookie is refused on the other', async () => {
    const jar = await signIn(alice);
    const id = jar.get(a.url, SESSION_COOKIE) ?? '';
    expect((await request(jar, `${a.url}/bff/logout`, { method: 'POST', headers: ajax })).status).toBe(200);
    const replay = new CookieJar();
    replay.set(b.url, SESSION_COOKIE, id);
    const answer = await sessionCall(b, replay);
    expect(answer.status).toBe(401);
    expect(answer.headers.get('link')).toBe('</bff/login>; rel="login"');
  });

  test('a user whose claims grant no scope is 403 on the operations, and sees no scope', async () => {
    const jar = await signIn(bob);
    const user = await sessionCall(a, jar, '/bff/user');
    expect(JSON.parse(user.body).scopes).toEqual([]);
    const plan = await sessionCall(b, jar);
    expect(plan.status).toBe(403);
    expect(JSON.parse(plan.body).status.description).toBe('CLIENT_FORBIDDEN');
  });

  test('a session record altered in Redis does not open', async () => {
    const jar = await signIn(alice);
    const id = jar.get(a.url, SESSION_COOKIE) ?? '';
    const handle = createHash('sha256').update(id).digest('base64url');
    for (const key of [`${PREFIX}session:{${handle}}`, `${PREFIX}session:{${handle}}:grant`]) {
      const raw = await redisClient.get(key);
      expect(raw).toMatch(/^v1:/);
      expect(raw).not.toContain('alice');
    }
    const key = `${PREFIX}session:{${handle}}:grant`;
    const raw = (await redisClient.get(key)) ?? '';
    const bytes = Buffer.from(raw.slice(3), 'base64');
    bytes[bytes.length - 20] ^= 1;
    await redisClient.set(key, `v1:${bytes.toString('base64')}`, 'KEEPTTL');
    expect((await sessionCall(a, jar)).status).toBe(401);
    expect((await sessionCall(b, jar)).status).toBe(401);
  });

  describe('back-channel logout', () => {
    const logoutToken = async (
      claims: Record<string, unknown>,
      sign: (jwt: SignJWT) => Promise<string>,
      header: Record<string, unknown> = { alg: 'ES256', typ: 'logout+jwt' },
    ) =>
      sign(
        new SignJWT({ events: { 'http://schemas.openid.net/event/backchannel-logout': {} }, ...claims })
          .setProtectedHeader(header as { alg: string })
          .setIssuer(provider.issuer)
          .setAudience(CLIENT_ID)
          .setIssuedAt()
          .setJti(randomBytes(8).toString('hex')),
      );
    const post = (gateway: GatewayProcess, body: string) =>
      fetch(`${gateway.url}/bff/backchannel-logout`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });

    test('forged, unsigned, foreign or malformed logout tokens are refused 400 and end nothing', async () => {
      const jar = await signIn(alice);
      const { privateKey } = await generateKeyPair('ES256');
      const foreign = await logoutToken({ sub: 'alice' }, (jwt) => jwt.sign(privateKey));
      const hmac = await logoutToken(
        { sub: 'alice' },
        (jwt) => jwt.sign(new TextEncoder().encode(CLIENT_SECRET)),
        {
          alg: 'HS256',
        },
      );
      const [head, payload] = foreign.split('.');
      const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${payload}.`;
      const stripped = `${head}.${payload}.`;
      for (const token of [foreign, hmac, unsigned, stripped, 'garbage', '', 'a.b.c']) {
        const answer = await post(b, new URLSearchParams({ logout_token: token }).toString());
        expect(answer.status).toBe(400);
        expect(((await answer.json()) as { status: { description: string } }).status.description).toBe(
          'INVALID_REQUEST',
        );
      }
      expect((await post(b, '')).status).toBe(400);
      expect((await post(b, 'logout_token=x&logout_token=y')).status).toBe(400);
      const json = await fetch(`${b.url}/bff/backchannel-logout`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ logout_token: foreign }),
      });
      expect(json.status).toBe(400);
      expect((await sessionCall(a, jar)).status).toBe(200);
    });

    test("the provider's logout reaches one replica and ends the user's sessions on both; others stay", async () => {
      const jar = await signIn(carol);
      // A second login in the same browser rides the same provider session (same sid).
      await signIn(carol, jar);
      const first = jar.get(a.url, SESSION_COOKIE) ?? '';
      const other = await signIn(dave);
      const before = provider.backchannelDeliveries().delivered;

      // RP-initiated logout at the provider: its confirmation form, then the provider posts the logout token.
      const page = await request(jar, `${provider.issuer}/session/end?client_id=${CLIENT_ID}`);
      const xsrf = /name="xsrf" value="([^"]+)"/.exec(page.body)?.[1];
      expect(xsrf).toBeTruthy();
      const confirmed = await request(jar, `${provider.issuer}/session/end/confirm`, {
        method: 'POST',
        body: new URLSearchParams({ xsrf: xsrf ?? '', logout: 'yes' }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(confirmed.status).toBe(303);
      expect(provider.backchannelDeliveries().delivered).toBe(before + 1);
      expect(provider.backchannelDeliveries().failed).toBe(0);

      const firstJar = new CookieJar();
      firstJar.set(a.url, SESSION_COOKIE, first);
      expect((await sessionCall(a, firstJar)).status).toBe(401);
      expect((await sessionCall(a, jar)).status).toBe(401);
      expect((await sessionCall(b, jar)).status).toBe(401);
      expect((await sessionCall(a, other)).status).toBe(200);
    });
  });

  test('revalidation: 200 concurrent calls on two replicas across two intervals, rotating refresh tokens: no session lost, one refresh per session per interval', async () => {
    const users = [alice, carol, dave, alice];
    const jars: CookieJar[] = [];
    for (const user of users) jars.push(await signIn(user));
    const refreshesOf = () => [...provider.refreshesByGrant().values()];
    const before = refreshesOf().reduce((sum, n) => sum + n, 0);
    const burst = async () => {
      const calls = Array.from({ length: 200 }, (_, i) =>
        sessionCall(i % 2 === 0 ? a : b, jars[i % jars.length]!),
      );
      return (await Promise.all(calls)).map((answer) => answer.status);
    };

    for (let interval = 1; interval <= 2; interval++) {
      // Bounded wait for the interval to pass (the provider's clock is the real one).
      await new Promise((resolve) => setTimeout(resolve, REVALIDATE_SECONDS * 1000 + 200));
      expect(new Set(await burst())).toEqual(new Set([200]));
      await waitFor(
        async () => refreshesOf().reduce((sum, n) => sum + n, 0) >= before + interval * jars.length,
        {
          what: 'every session revalidated',
          timeoutMs: 10_000,
        },
      );
      expect(new Set(await burst())).toEqual(new Set([200]));
    }
    expect(refreshesOf().reduce((sum, n) => sum + n, 0)).toBe(before + 2 * jars.length);
    expect(refreshesOf().every((n) => n === 2)).toBe(true);
    expect(provider.refusedRefreshes()).toBe(0);
  }, 60_000);

  test('a refused refresh ends the session cleanly (401 with the login hint)', async () => {
    const jar = await signIn(dave);
    await provider.revokeUser('dave');
    await new Promise((resolve) => setTimeout(resolve, REVALIDATE_SECONDS * 1000 + 200));
    // The request that finds the session due still passes: revalidation runs in the background.
    expect((await sessionCall(a, jar)).status).toBe(200);
    await waitFor(async () => (await sessionCall(b, jar)).status === 401, {
      what: 'session ended',
      timeoutMs: 10_000,
    });
    const answer = await sessionCall(a, jar);
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body).status.detail).toContain('/bff/login');
  }, 30_000);

  test('a provider outage during revalidation keeps the session', async () => {
    const jar = await signIn(alice);
    await provider.close();
    await new Promise((resolve) => setTimeout(resolve, REVALIDATE_SECONDS * 1000 + 200));
    expect((await sessionCall(a, jar)).status).toBe(200);
    await waitFor(async () => a.logs().includes('session.revalidation_failed'), {
      what: 'revalidation attempted',
      timeoutMs: 10_000,
    });
    expect((await sessionCall(a, jar)).status).toBe(200);
    expect((await sessionCall(b, jar)).status).toBe(200);
  }, 30_000);

  test('no token, session id or user name in any log line of either replica', async () => {
    for (const gateway of [a, b]) {
      const logs = gateway.logs();
      expect(logs).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}/);
      expect(logs).not.toContain(CLIENT_SECRET);
      expect(logs).not.toMatch(/alice|carol|dave/);
    }
  });
});
