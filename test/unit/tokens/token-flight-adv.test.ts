// An adversary's read of c41f085: flights superseded by a credential change, the pair of retired credentials, and
// the fleet lock's count of its own releases.
import { GatewayError } from '../../../src/http/gateway-error';
import { tokenKeys } from '../../../src/keys/redis-keys';
import { createMemoryTokenStore } from '../../../src/store/memory-token-store';
import type { TokenStore } from '../../../src/tokens/internal/token-store';
import { FakeCredentialSource, fakeFleet, settle, stopManagers, TEST_BASE_URL } from './token-fakes';

const KEYS = tokenKeys('bff:', TEST_BASE_URL, 'merchant');
afterEach(stopManagers);

/** Resolves/rejects like `promise`, and tells whether it has settled yet. */
function watched<T>(promise: Promise<T>) {
  const state = { done: false };
  const wrapped = promise.finally(() => {
    state.done = true;
  });
  wrapped.catch(() => undefined);
  return { promise: wrapped, state };
}

describe('a flight superseded while it waits on the fleet lock hands over at once', () => {
  it('a password change: the waiting flight hands its callers the new pair as soon as the fleet has it, not after TOKEN_LOCK_WAIT_MS', async () => {
    const f = fakeFleet();
    const r1 = f.replica();
    await r1.start();
    // Another replica holds the lock (it is logging in).
    await f.store.acquireLock(KEYS.lock, 'other-replica', 15_000);
    const before = watched(r1.getAccessToken());
    await f.clock.advance(100);
    // The password rotates; the other replica already uses the new one: it lets go and shares the new pair.
    f.client.options.password = 'secret-2';
    f.credentials.change('merchant', 'secret-2');
    await f.store.releaseLock(KEYS.lock, 'other-replica');
    const r2 = f.replica();
    await r2.start();
    const fresh = await r2.getAccessToken();
    expect(fresh.source).toBe('upstream');
    await f.clock.advance(300);
    // R1 itself already serves the new pair from memory (it adopted the notification)...
    expect((await r1.getAccessToken()).value).toBe(fresh.value);
    // ...but the callers who asked just before the change are still held by the old flight's lock wait (5 s).
    expect(before.state.done).toBe(true);
    await f.clock.advance(6_000);
    expect((await before.promise).value).toBe(fresh.value);
    expect(f.client.logins).toBe(1);
  });

  it('a username change: callers of the old merchant’s flight do not wait out a busy old lock (2 × TOKEN_LOCK_TTL_MS): they get the new token', async () => {
    const f = fakeFleet();
    const r1 = f.replica();
    await r1.start();
    // A slow (or wedged) holder of the old merchant's lock.
    await f.store.acquireLock(KEYS.lock, 'slow-replica', 60_000);
    const before = watched(r1.getAccessToken());
    await f.clock.advance(100);
    f.client.options.username = 'merchant-2';
    f.credentials.change('merchant-2', 'secret');
    const after = await r1.getAccessToken();
    expect(after.source).toBe('upstream');
    await f.clock.advance(1_000);
    expect(before.state.done).toBe(true);
    await f.clock.advance(31_000);
    expect((await before.promise).value).toBe(after.value);
  });
});

describe('a renewal out when the credentials change', () => {
  it('the retired credentials’ renewed token, refused on the retry, is no refusal streak of the new password (no fleet-wide backoff)', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    await manager.start();
    const first = await manager.getAccessToken();
    f.client.hold();
    // A 401 on the first token: the renewal is already at the token endpoint when the password rotates.
    const renewing = manager.renewAfterRejection(first.value);
    await settle();
    expect(f.client.usedRefreshTokens.length + f.client.loginUsers.length).toBe(2);
    f.client.options.password = 'secret-2';
    f.credentials.change('merchant', 'secret-2');
    f.client.release();
    // Its callers get the retired credentials' token ("its callers' alone")...
    const retired = await renewing;
    // ...which the provider, having retired the old password, refuses on the retry.
    const next = await manager.renewAfterRejection(retired.value).catch((error: GatewayError) => error);
    expect(next).not.toBeInstanceOf(GatewayError);
    expect(await f.store.get(KEYS.failure)).toBeUndefined();
    await expect(manager.getAccessToken()).resolves.toBeDefined();
    expect(f.client.loginUsers.at(-1)).toBe('merchant');
  });
});

describe('holds: handovers, sentinels, kinds and the lock', () => {
  /** The fleet's memory store, calling `hook.onPairRead(n)` after the n-th read of the pair. */
  function hookedStore(base: TokenStore) {
    const hook: { onPairRead?: (n: number) => void; reads: number } = { reads: 0 };
    const store = {
      ...base,
      async get(key: string) {
        const value = await base.get(key);
        if (key === KEYS.pair) hook.onPairRead?.(++hook.reads);
        return value;
      },
    } satisfies TokenStore;
    return { store, hook };
  }

  it('a credential change during every handover: each caller gets the last credentials’ token, one login, no sentinel', async () => {
    const { store, hook } = hookedStore(createMemoryTokenStore());
    const f = fakeFleet({ store: () => store });
    const manager = f.replica();
    await manager.start();
    hook.reads = 0;
    hook.onPairRead = (n) => {
      if (n > 7) return;
      f.client.options.password = `secret-${n}`;
      f.credentials.change('merchant', `secret-${n}`);
    };
    const callers = Array.from({ length: 5 }, () => manager.getAccessToken());
    await f.clock.advance(100);
    const tokens = await Promise.all(callers);
    expect(f.credentials.changes()).toBe(7);
    expect(new Set(tokens.map((t) => t.value)).size).toBe(1);
    expect(f.client.loginFailures).toBe(0);
    expect(f.client.logins).toBe(1);
    expect((await manager.getAccessToken()).source).toBe('memory');
  });

  it('renewAfterRejection awaiting a superseded flight gets the new credentials’ token, never the sentinel', async () => {
    const f = fakeFleet();
    const manager = f.replica();
    await manager.start();
    const first = await manager.getAccessToken();
    const a = manager.renewAfterRejection(first.value);
    const b = manager.renewAfterRejection(first.value);
    f.client.options.password = 'secret-2';
    f.credentials.change('merchant', 'secret-2');
    const [ta, tb] = await Promise.all([a, b]);
    expect(ta.value).not.toBe(first.value);
    expect(tb.value).toBe(ta.value);
    // The renewal never went out with the retired password (no refresh with its refresh token): one login.
    expect(f.client.refreshes).toBe(0);
    expect(f.client.logins).toBe(2);
    expect(f.client.loginFailures + f.client.refreshFailures).toBe(0);
  });

  it('a proactive refresh superseded by a change: no call with the retired credentials, no failure log, the new token serves', async () => {
    const { store, hook } = hookedStore(createMemoryTokenStore());
    const f = fakeFleet({ store: () => store });
    const manager = f.replica();
    await manager.start();
    const first = await manager.getAccessToken();
    hook.onPairRead = () => {
      hook.onPairRead = undefined;
      f.client.options.password = 'secret-2';
      f.credentials.change('merchant', 'secret-2');
    };
    await f.clock.advance(first.expiresAt - 63_000 - f.clock.now() + 10);
    expect(f.credentials.changes()).toBe(1);
    expect(f.log()).not.toContain('token.refresh.background');
    expect(f.client.refreshes).toBe(0);
    expect(f.client.logins).toBe(2);
    expect(f.client.loginFailures).toBe(0);
    const next = await manager.getAccessToken();
    expect(next.value).not.toBe(first.value);
    expect(next.source).toBe('memory');
  });

  it('stop() while the holder is superseded: callers get a GatewayError, never the sentinel, no login, the lock is free', async () => {
    const { store, hook } = hookedStore(createMemoryTokenStore());
    const f = fakeFleet({ store: () => store });
    const manager = f.replica();
    await manager.start();
    hook.reads = 0;
    let stopping: Promise<void> | undefined;
    // The holder's re-read (the second read of the flight): the password rotates and the replica stops.
    hook.onPairRead = (n) => {
      if (n !== 2) return;
      f.credentials.change('merchant', 'secret-2');
      stopping = manager.stop();
    };
    const outcome = await manager.getAccessToken().catch((error: unknown) => error);
    await stopping;
    expect(outcome).toBeInstanceOf(GatewayError);
    expect(f.client.loginUsers).toEqual([]);
    expect(await f.store.get(KEYS.lock)).toBeUndefined();
  });

  it('steady state: one lock attempt and one release per refresh for a fleet of two (the release count adds no command)', async () => {
    const base = createMemoryTokenStore();
    const counts: Record<string, number> = {};
    const counted = new Proxy(base, {
      get(target, prop: string) {
        const value = (target as unknown as Record<string, unknown>)[prop];
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          counts[prop] = (counts[prop] ?? 0) + 1;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    }) as TokenStore;
    const f = fakeFleet({ store: () => counted });
    const replicas = [f.replica(), f.replica()];
    for (const r of replicas) await r.start();
    await Promise.all(replicas.map((r) => r.getAccessToken()));
    for (const k of Object.keys(counts)) counts[k] = 0;
    await f.clock.advance(3 * 300_000);
    const refreshes = f.client.refreshes;
    expect(refreshes).toBeGreaterThanOrEqual(3);
    expect(counts.acquireLock).toBe(refreshes);
    expect(counts.releaseLock).toBe(refreshes);
    // Per refresh: the new pair's notification and the lock's release (one command each, once per token lifetime).
    expect(counts.publish).toBe(2 * refreshes);
  });
});

describe('a holder whose credentials were retired while it held the lock tells the fleet it let go', () => {
  it('a replica still on the old password waiting for that pair logs in at once, not after TOKEN_LOCK_WAIT_MS', async () => {
    const f = fakeFleet();
    // A rollout: replica A reads the new password first, B still has the old one (the provider takes both a while).
    const stillOld = new FakeCredentialSource();
    const a = f.replica();
    const b = f.replica({ credentials: stillOld });
    await a.start();
    await b.start();
    f.client.hold();
    const aCallers = a.getAccessToken();
    await settle();
    expect(f.client.loginUsers).toEqual(['merchant']);
    const bCallers = watched(b.getAccessToken());
    await f.clock.advance(100);
    f.credentials.change('merchant', 'secret-2');
    f.client.release();
    // A's login with the retired password serves its own callers only: not shared, nothing for B to adopt.
    await expect(aCallers).resolves.toMatchObject({ source: 'upstream' });
    await f.clock.advance(200);
    expect(bCallers.state.done).toBe(true);
    await expect(bCallers.promise).resolves.toMatchObject({ source: 'upstream' });
    expect(f.client.logins).toBe(2);
  });

  it('a replica stopping while its refresh is out keeps the lock until the call ends: nobody spends that refresh token again', async () => {
    const f = fakeFleet({ client: { rotateRefresh: true } });
    const a = f.replica();
    await a.start();
    await a.getAccessToken();
    const b = f.replica();
    await b.start();
    await b.getAccessToken();
    f.client.hold();
    // Both refresh timers fire; A takes the lock and its refresh goes out, B waits for A's pair.
    await f.clock.advance(240_000);
    expect(f.client.usedRefreshTokens).toHaveLength(1);
    const stopping = a.stop();
    await f.clock.advance(60);
    // Told at once, B would refresh with the same (rotated, single-use) refresh token while A's call is still out.
    expect(f.client.usedRefreshTokens).toHaveLength(1);
    // Nor after B's wait (TOKEN_LOCK_WAIT_MS) or the lease (TOKEN_LOCK_TTL_MS) ends: A still renews it while its call
    // is out, and A's stop() gave up waiting for the call after TOKEN_LOCK_WAIT_MS.
    await f.clock.advance(20_000);
    await stopping;
    expect(f.client.usedRefreshTokens).toHaveLength(1);
    f.client.release();
    await f.clock.advance(10_000);
    const used = f.client.usedRefreshTokens;
    expect(new Set(used).size).toBe(used.length);
    expect(f.client.refreshFailures).toBe(0);
  });
});
