import { randomBytes } from 'node:crypto';
import { GatewayError } from '../../../src/http/gateway-error';
import { tokenKeys } from '../../../src/keys/redis-keys';
import { createTokenCipher } from '../../../src/tokens/internal/token-cipher';
import { brokenStore, fakeFleet, settle, stopManagers, TEST_BASE_URL } from './token-fakes';

const BASE_URL = TEST_BASE_URL;

afterEach(stopManagers);

const exp = (token: string) =>
  JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).exp * 1000;

describe('token manager: memory first and in-process single flight', () => {
  it('a cold replica logs in once and then answers from memory with the same promise', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    await manager.start();
    const first = await manager.getAccessToken();
    expect(first.source).toBe('upstream');
    expect(first.expiresAt).toBe(exp(first.value));
    const again = manager.getAccessToken();
    expect(again).toBe(manager.getAccessToken());
    expect((await again).source).toBe('memory');
    expect((await again).value).toBe(first.value);
    expect(f.client.logins).toBe(1);
    expect(manager.status()).toEqual({
      hasValidToken: true,
      lastFailure: undefined,
      storeHealthy: true,
      accessExpiresAt: first.expiresAt,
    });
  });

  it('100 concurrent callers share one login', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    f.client.hold();
    const calls = Array.from({ length: 100 }, () => manager.getAccessToken());
    await settle();
    f.client.release();
    const tokens = await Promise.all(calls);
    expect(new Set(tokens.map((t) => t.value)).size).toBe(1);
    expect(f.client.logins).toBe(1);
  });
});

describe('token manager: proactive refresh', () => {
  it('fires at exp - skew - jitter and uses the refresh token', async () => {
    const f = fakeFleet({ random: () => 0.5 });
    const manager = f.replica();
    const first = await manager.getAccessToken();
    // exp is whole seconds; the refresh is due at exp - 60 s - 0.5 * 10 % * 60 s = exp - 63 s.
    const due = first.expiresAt - 63_000;
    await f.clock.advance(due - f.clock.now() - 10);
    expect(f.client.refreshes).toBe(0);
    await f.clock.advance(20);
    expect(f.client.refreshes).toBe(1);
    expect(f.client.logins).toBe(1);
    const next = await manager.getAccessToken();
    expect(next.source).toBe('memory');
    expect(next.value).not.toBe(first.value);
  });

  it('a token living longer than a timer can wait (or an exp in milliseconds) is not refreshed in a tight loop', async () => {
    const f = fakeFleet({ client: { accessTtlSeconds: 40 * 86_400 } });
    // As Node does: a delay past 2^31 - 1 ms does not fit in its timer and fires after 1 ms instead.
    const nodeSetTimeout = f.clock.setTimeout;
    f.clock.setTimeout = (run, ms) => nodeSetTimeout(run, ms > 2 ** 31 - 1 ? 1 : ms);
    const manager = f.replica();
    await manager.getAccessToken();
    await f.clock.advance(1_000);
    expect(f.client.refreshes).toBe(0);
  });

  it('keeps refreshing once per lifetime over several lifetimes, with no caller ever waiting', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    await manager.getAccessToken();
    for (let second = 0; second < 3 * 300; second += 5) {
      await f.clock.advance(5_000);
      expect((await manager.getAccessToken()).source).toBe('memory');
    }
    expect(f.client.logins).toBe(1);
    expect(f.client.refreshes).toBeGreaterThanOrEqual(3);
    expect(f.client.refreshes).toBeLessThanOrEqual(4);
  });

  it('logs in when the refresh token is refused', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    const first = await manager.getAccessToken();
    f.client.revokeRefreshTokens();
    await f.clock.advance(first.expiresAt - 55_000 - f.clock.now());
    expect(f.client.refreshFailures).toBe(1);
    expect(f.client.logins).toBe(2);
    expect((await manager.getAccessToken()).value).not.toBe(first.value);
  });

  it('logs in instead of refreshing when the refresh token has less than the skew left', async () => {
    const f = fakeFleet({ client: { accessTtlSeconds: 300, refreshTtlSeconds: 280 } });
    const manager = f.replica();
    const first = await manager.getAccessToken();
    await f.clock.advance(first.expiresAt - 55_000 - f.clock.now());
    expect(f.client.usedRefreshTokens).toHaveLength(0);
    expect(f.client.logins).toBe(2);
  });

  it('stores a rotated refresh token and uses it next time', async () => {
    const f = fakeFleet({ client: { rotateRefresh: true } });
    const manager = f.replica();
    await manager.getAccessToken();
    await f.clock.advance(300_000);
    await f.clock.advance(300_000);
    expect(f.client.refreshes).toBe(2);
    expect(f.client.refreshFailures).toBe(0);
    expect(f.client.logins).toBe(1);
    const [firstUsed, secondUsed] = f.client.usedRefreshTokens;
    expect(secondUsed).not.toBe(firstUsed);
    const stored = JSON.parse((await f.store.get(tokenKeys('bff:', BASE_URL, 'merchant').pair)) as string);
    expect(stored.refresh).not.toBe(secondUsed);
  });

  it('falls back to 300 s / 86400 s when the tokens carry no exp', async () => {
    const f = fakeFleet({ client: { noExp: true } });
    const manager = f.replica();
    const start = f.clock.now();
    const token = await manager.getAccessToken();
    expect(token.expiresAt).toBe(start + 300_000);
    const stored = JSON.parse((await f.store.get(tokenKeys('bff:', BASE_URL, 'merchant').pair)) as string);
    expect(stored.refreshExpiresAt).toBe(start + 86_400_000);
    await f.clock.advance(300_000 - 63_000 + 10);
    expect(f.client.refreshes).toBe(1);
  });

  it('a fleet sharing a store refreshes once per lifetime, not once per replica', async () => {
    const f = fakeFleet();
    const replicas = [f.replica(), f.replica(), f.replica()];
    for (const r of replicas) await r.start();
    await Promise.all(replicas.map((r) => r.getAccessToken()));
    for (let second = 0; second < 3 * 300; second += 5) {
      await f.clock.advance(5_000);
      const tokens = await Promise.all(replicas.map((r) => r.getAccessToken()));
      expect(new Set(tokens.map((t) => t.value)).size).toBe(1);
    }
    expect(f.client.logins).toBe(1);
    expect(f.client.refreshes).toBeLessThanOrEqual(4);
  });
});

describe('token manager: the fleet lock', () => {
  it('only one replica calls the upstream; the others read its pair from the store', async () => {
    const f = fakeFleet();
    const [a, b, c] = [f.replica(), f.replica(), f.replica()];
    for (const r of [a, b, c]) await r.start();
    f.client.hold();
    const calls = [a, b, c].flatMap((r) => Array.from({ length: 30 }, () => r.getAccessToken()));
    await f.clock.advance(100);
    f.client.release();
    await f.clock.advance(200);
    const tokens = await Promise.all(calls);
    expect(f.client.logins).toBe(1);
    expect(new Set(tokens.map((t) => t.value)).size).toBe(1);
    expect(new Set(tokens.map((t) => t.source))).toEqual(new Set(['upstream', 'redis']));
  });

  it('a lost owner’s lease expires and another replica takes over', async () => {
    const f = fakeFleet({ settings: { lockTtlMs: 800, lockWaitMs: 1_000 } });
    const keys = tokenKeys('bff:', BASE_URL, 'merchant');
    expect(await f.store.acquireLock(keys.lock, 'crashed-replica', 800)).toBe(true);
    const manager = f.replica();
    const pending = manager.getAccessToken();
    await f.clock.advance(900);
    expect(f.client.logins).toBe(0);
    await f.clock.advance(200);
    await expect(pending).resolves.toMatchObject({ source: 'upstream' });
    expect(f.client.logins).toBe(1);
    // It took the lock as its own and released it: the lock is free again.
    expect(await f.store.acquireLock(keys.lock, 'someone', 1000)).toBe(true);
  });

  it('a waiter keeps waiting while the lock is held, then gives up after twice the lease and fetches itself', async () => {
    const f = fakeFleet({ settings: { lockTtlMs: 5_000, lockWaitMs: 1_000 } });
    const keys = tokenKeys('bff:', BASE_URL, 'merchant');
    // A holder that never answers and whose lock never lapses (a wedged replica, a clock gone wrong).
    await f.store.acquireLock(keys.lock, 'stuck-replica', 60_000);
    const manager = f.replica();
    const pending = manager.getAccessToken();
    await f.clock.advance(9_000);
    expect(f.client.logins).toBe(0);
    await f.clock.advance(2_000);
    await expect(pending).resolves.toMatchObject({ source: 'upstream' });
    expect(f.client.logins).toBe(1);
    // Someone else's lock is never released by this replica.
    expect(await f.store.releaseLock(keys.lock, 'someone-else')).toBe(false);
    expect(await f.store.get(keys.lock)).toBe('stuck-replica');
  });

  it('a waiter outlasts a holder slower than its lock wait: still one login for the fleet', async () => {
    const f = fakeFleet({ settings: { lockTtlMs: 15_000, lockWaitMs: 1_000 } });
    const holder = f.replica();
    const waiter = f.replica();
    f.client.hold();
    const first = holder.getAccessToken();
    await settle();
    const second = waiter.getAccessToken();
    await f.clock.advance(8_000);
    f.client.release();
    await f.clock.advance(200);
    const [a, b] = await Promise.all([first, second]);
    expect(b.value).toBe(a.value);
    expect(f.client.logins).toBe(1);
  });

  it('stop() keeps a lock whose token call is out until the call ends: then it is released, the pair shared', async () => {
    const f = fakeFleet();
    const keys = tokenKeys('bff:', BASE_URL, 'merchant');
    const manager = f.replica();
    f.client.hold();
    const pending = manager.getAccessToken().catch(() => undefined);
    await settle();
    expect(await f.store.get(keys.lock)).toBeDefined();
    const stopping = manager.stop();
    await settle();
    // Released now, the lock would let another replica spend the same refresh token while this call is out.
    expect(await f.store.get(keys.lock)).toBeDefined();
    f.client.release();
    // stop() waited for the call: the lock is released and the pair shared by the time it resolves.
    await stopping;
    expect(await f.store.get(keys.lock)).toBeUndefined();
    await pending;
    expect(await f.store.get(keys.pair)).toBeDefined();
    expect(f.clock.pending()).toBe(0);
  });
});

describe('token manager: renewal after an upstream 401', () => {
  it('drops exactly the refused token and gets a new one through the single flight', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    const first = await manager.getAccessToken();
    const renewals = await Promise.all(
      Array.from({ length: 20 }, () => manager.renewAfterRejection(first.value)),
    );
    expect(new Set(renewals.map((t) => t.value)).size).toBe(1);
    expect(renewals[0].value).not.toBe(first.value);
    expect(f.client.refreshes + f.client.logins).toBe(2);
  });

  it('compare before delete: a newer token written by another replica survives', async () => {
    const f = fakeFleet();
    const [a, b] = [f.replica(), f.replica()];
    const old = await a.getAccessToken();
    expect((await b.getAccessToken()).value).toBe(old.value);
    const newer = await b.renewAfterRejection(old.value);
    expect(newer.value).not.toBe(old.value);
    const calls = f.client.logins + f.client.refreshes;
    // A learns late that the old token was refused: it must not delete B's newer pair, and needs no upstream call.
    const renewed = await a.renewAfterRejection(old.value);
    expect(renewed.value).toBe(newer.value);
    expect(f.client.logins + f.client.refreshes).toBe(calls);
    const stored = JSON.parse((await f.store.get(tokenKeys('bff:', BASE_URL, 'merchant').pair)) as string);
    expect(stored.access).toBe(newer.value);
  });

  it('logs in when the refresh token was revoked together with the access token', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    const first = await manager.getAccessToken();
    f.client.revokeRefreshTokens();
    const renewed = await manager.renewAfterRejection(first.value);
    expect(renewed.value).not.toBe(first.value);
    expect(f.client.refreshFailures).toBe(1);
    expect(f.client.logins).toBe(2);
  });
});

describe('token manager: refusals back off fleet-wide', () => {
  it.each(['UPSTREAM_AUTH_FAILED', 'UPSTREAM_IP_NOT_WHITELISTED'] as const)(
    'after %s, calls fail fast without asking the upstream until the interval ends',
    async (reason) => {
      const f = fakeFleet({ random: () => 0 });
      f.client.failWith = new GatewayError(reason, 'refused');
      const [a, b] = [f.replica(), f.replica()];
      for (const r of [a, b]) await r.start();
      for (let i = 0; i < 25; i++) {
        await expect(a.getAccessToken()).rejects.toMatchObject({ reason });
        await expect(b.getAccessToken()).rejects.toMatchObject({ reason });
        await f.clock.advance(100);
      }
      expect(f.client.loginFailures).toBe(1);
      expect(a.status().lastFailure).toBe(reason);
      await f.clock.advance(20_000);
      await expect(b.getAccessToken()).rejects.toMatchObject({ reason });
      expect(f.client.loginFailures).toBe(2);
      // The second refusal doubles the wait.
      await f.clock.advance(20_001);
      await expect(a.getAccessToken()).rejects.toMatchObject({ reason });
      expect(f.client.loginFailures).toBe(2);
      f.client.failWith = undefined;
      await f.clock.advance(20_000);
      await expect(a.getAccessToken()).resolves.toMatchObject({ source: 'upstream' });
      expect(a.status().lastFailure).toBeUndefined();
    },
  );

  it('a credential change ends the backoff and drops the old tokens', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    await manager.start();
    const first = await manager.getAccessToken();
    f.credentials.change('wrong-user', 'secret');
    await expect(manager.getAccessToken()).rejects.toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
    await expect(manager.getAccessToken()).rejects.toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
    expect(f.client.loginFailures).toBe(1);
    f.client.options.username = 'merchant-2';
    f.credentials.change('merchant-2', 'secret');
    const next = await manager.getAccessToken();
    expect(next.value).not.toBe(first.value);
    expect(f.client.loginUsers).toEqual(['merchant', 'wrong-user', 'merchant-2']);
    expect(await f.store.get(tokenKeys('bff:', BASE_URL, 'merchant-2').pair)).toBeDefined();
  });
});

describe('token manager: a credential change during a login', () => {
  it('a login out when the credentials change is not handed to callers after it: they log in as the new merchant', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    f.client.hold();
    const before = manager.getAccessToken();
    await settle();
    // The provider retired the first merchant's credentials; the account's files now hold the second's.
    f.client.options.username = 'merchant-2';
    f.credentials.change('merchant-2', 'secret');
    const after = manager.getAccessToken();
    await settle();
    f.client.release();
    await expect(before).rejects.toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
    await expect(after).resolves.toMatchObject({ source: 'upstream' });
    expect(f.client.loginUsers).toEqual(['merchant', 'merchant-2']);
    // The old flight's end did not clear the new one's pair: memory answers now, as merchant-2.
    await expect(manager.getAccessToken()).resolves.toMatchObject({
      source: 'memory',
      value: (await after).value,
    });
    expect(await f.store.get(tokenKeys('bff:', BASE_URL, 'merchant-2').pair)).toBeDefined();
  });

  it('a flight the credentials change under before it logs in never logs in with the retired ones: its callers get the new token', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    await manager.start();
    // The flight starts (its first step is the store read); the password is rotated before it reaches the provider,
    // which already refuses the old one.
    const before = manager.getAccessToken();
    f.client.options.password = 'secret-2';
    f.credentials.change('merchant', 'secret-2');
    const after = manager.getAccessToken();
    await expect(before).resolves.toMatchObject({ source: 'upstream' });
    expect((await before).value).toBe((await after).value);
    expect(f.client.loginFailures).toBe(0);
    expect(f.client.logins).toBe(1);
  });

  it('a pair that comes back for credentials retired while the login was out is not shared: the store never holds it', async () => {
    const key = randomBytes(32);
    const f = fakeFleet({ encryptionKey: key });
    const manager = f.replica();
    await manager.start();
    f.client.hold();
    const before = manager.getAccessToken();
    await settle();
    expect(f.client.loginUsers).toEqual(['merchant']);
    // A password change (the same store key): the provider still takes the old one for a while.
    f.credentials.change('merchant', 'secret-2');
    f.client.release();
    const retired = await before;
    const pairKey = tokenKeys('bff:', BASE_URL, 'merchant').pair;
    const raw = (await f.store.get(pairKey)) as string | undefined;
    const shared = raw === undefined ? undefined : createTokenCipher(key).open(raw, pairKey);
    expect(shared ?? '').not.toContain(retired.value);
    // Callers from now on log in with the new password, and that pair is the one the fleet shares.
    f.client.options.password = 'secret-2';
    const next = await manager.getAccessToken();
    expect(next.value).not.toBe(retired.value);
    const stored = createTokenCipher(key).open((await f.store.get(pairKey)) as string, pairKey);
    expect(JSON.parse(stored as string).access).toBe(next.value);
  });

  it("a change and a change back while a login is out (A, B, A): its pair is the current credentials' and the fleet shares it", async () => {
    const f = fakeFleet();
    const manager = f.replica();
    await manager.start();
    f.client.hold();
    const before = manager.getAccessToken();
    await settle();
    f.credentials.change('merchant', 'secret-2');
    f.credentials.change('merchant', 'secret');
    f.client.release();
    const token = await before;
    expect(token.source).toBe('upstream');
    // Another replica finds it in the store: no second login.
    const other = f.replica();
    await other.start();
    await expect(other.getAccessToken()).resolves.toMatchObject({ value: token.value });
    expect(f.client.logins).toBe(1);
  });

  it('a token renewed under the old credentials and refused after they changed is no refusal streak of the new ones', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    await manager.start();
    const first = await manager.getAccessToken();
    const renewed = await manager.renewAfterRejection(first.value);
    f.client.options.username = 'merchant-2';
    f.credentials.change('merchant-2', 'secret');
    const next = await manager.renewAfterRejection(renewed.value);
    expect(next.value).not.toBe(renewed.value);
    expect(f.client.loginUsers.at(-1)).toBe('merchant-2');
  });
});

describe('token manager: the store may fail', () => {
  it('store errors fall through to memory and the replica’s own login, counted and reported to the health owner', async () => {
    const f = fakeFleet();
    const reports: string[] = [];
    const storeHealth = {
      reportFailure: (_error: unknown, noticedBy?: string) => reports.push(`failure by ${noticedBy}`),
      reportSuccess: () => reports.push('success'),
    };
    const manager = f.replica({ store: brokenStore(), storeHealth });
    await manager.start();
    const token = await manager.getAccessToken();
    expect(token.source).toBe('upstream');
    expect((await manager.getAccessToken()).source).toBe('memory');
    expect(manager.status().storeHealthy).toBe(false);
    // The outage is the owner's to log, once: the token cache reports it and logs only a debug line per call.
    expect(reports).toEqual(['failure by token cache']);
    expect(f.log()).not.toMatch(/"level":(40|50)/);
    expect(f.log()).toContain('token.store.error');
    const errors = await f.metrics.registry.getSingleMetricAsString('token_store_errors_total');
    expect(errors).toMatch(/operation="get"/);
    // The refresh still happens, on the replica's own.
    await f.clock.advance(300_000);
    expect(f.client.refreshes).toBeGreaterThanOrEqual(1);
  });
});

describe('token manager: the cached value is encrypted', () => {
  it('stores neither a token nor field names, decrypts back, and treats a tampered value as absent', async () => {
    const key = randomBytes(32);
    const f = fakeFleet({ encryptionKey: key });
    const manager = f.replica();
    const token = await manager.getAccessToken();
    const pairKey = tokenKeys('bff:', BASE_URL, 'merchant').pair;
    const raw = (await f.store.get(pairKey)) as string;
    expect(raw).not.toContain(token.value);
    expect(raw).not.toContain('eyJ');
    expect(raw).not.toContain('access');
    expect(raw).not.toContain('refresh');
    const opened = JSON.parse(createTokenCipher(key).open(raw, pairKey) as string);
    expect(opened.access).toBe(token.value);

    const tampered = `${raw.slice(0, 20)}${raw[20] === 'A' ? 'B' : 'A'}${raw.slice(21)}`;
    await f.store.set(pairKey, tampered, 60_000);
    const cold = f.replica();
    await cold.start();
    await expect(cold.getAccessToken()).resolves.toMatchObject({ source: 'upstream' });
    expect(f.client.refreshes + f.client.logins).toBe(2);
    expect(f.log()).toContain('token.store.unreadable');
  });

  it('never logs a token, the password or the username', async () => {
    const f = fakeFleet({ client: { rotateRefresh: true } });
    const manager = f.replica();
    const token = await manager.getAccessToken();
    await f.clock.advance(300_000);
    await manager.renewAfterRejection((await manager.getAccessToken()).value);
    const log = f.log();
    expect(log).toContain('token.login');
    expect(log).toContain('token.refresh');
    expect(log).not.toContain(token.value);
    expect(log).not.toContain('eyJ');
    expect(log).not.toContain('secret');
    expect(log).not.toContain('merchant');
  });
});
