import { GatewayError } from '../../../src/http/gateway-error';
import { tokenKeys } from '../../../src/keys/redis-keys';
import { createReadiness } from '../../../src/operations/readiness';
import { BackoffTrack, nextWaitMs } from '../../../src/tokens/internal/backoff-track';
import type { TokenProvider } from '../../../src/tokens/internal/token-provider';
import { brokenStore, FakeClock, fakeFleet, settle, stopManagers, TEST_BASE_URL } from './token-fakes';

const BASE_URL = TEST_BASE_URL;
const HOUR = 3_600_000;
const KEYS = tokenKeys('bff:', BASE_URL, 'merchant');

afterEach(stopManagers);

/** Every replica asks for a token (callers) and is probed (/readyz) every `stepMs`, for `durationMs`. */
async function constantTraffic(
  clock: FakeClock,
  replicas: TokenProvider[],
  durationMs: number,
  stepMs: number,
  onAnswer: (error: unknown) => void = () => undefined,
): Promise<void> {
  const probes = replicas.map((tokens) =>
    createReadiness({
      accounts: { all: () => [{ id: 'default', tokens, circuitStates: () => ({ plan: 'closed' }) }] },
      storeKind: 'redis',
    }),
  );
  for (let t = 0; t < durationMs; t += stepMs) {
    for (const [i, replica] of replicas.entries()) {
      replica.getAccessToken().then(
        () => onAnswer(undefined),
        (error) => onAnswer(error),
      );
      probes[i].report();
    }
    await clock.advance(stepMs);
  }
}

describe('login back-off: exponential, fleet-wide, for days', () => {
  it('the waits double from the minimum to the maximum, jittered upwards and never past the maximum', () => {
    const policy = { minMs: 20_000, maxMs: 900_000, ceilingMs: 900_000 };
    expect([1, 2, 3, 4, 5, 6, 7, 30].map((n) => nextWaitMs(policy, n, () => 0))).toEqual([
      20_000, 40_000, 80_000, 160_000, 320_000, 640_000, 900_000, 900_000,
    ]);
    expect(nextWaitMs(policy, 1, () => 0.999)).toBeGreaterThan(24_900);
    expect(nextWaitMs(policy, 6, () => 0.999)).toBe(799_840);
    expect(nextWaitMs(policy, 7, () => 0.999)).toBe(900_000);
    expect(nextWaitMs({ ...policy, minMs: 0 }, 5, () => 0.5)).toBe(0);
  });

  it('a record from the store is never trusted further than the policy: future times count from first sight', async () => {
    const clock = new FakeClock();
    const track = new BackoffTrack({ minMs: 1_000, maxMs: 8_000, ceilingMs: 8_000 }, clock.now, () => 0);
    const forged = {
      reason: 'UPSTREAM_AUTH_FAILED',
      at: clock.now() + 365 * 24 * HOUR,
      waitMs: 1e15,
      streak: 1e9,
    };
    track.observe(forged);
    expect(track.remaining()).toBe(8_000);
    await clock.advance(5_000);
    // Re-reading the same record (it stays in Redis) does not restart the wait.
    track.observe(forged);
    expect(track.remaining()).toBe(3_000);
    await clock.advance(3_000);
    track.observe(forged);
    expect(track.remaining()).toBe(0);
    // The next real failure continues a bounded streak: the wait stays at the maximum.
    expect(track.failed('UPSTREAM_AUTH_FAILED').waitMs).toBe(8_000);
  });

  it('24 h of refused credentials under constant traffic and probes on 3 replicas cost at most 110 logins', async () => {
    const f = fakeFleet({ random: Math.random });
    f.client.options.password = 'the-real-password';
    const replicas = [f.replica(), f.replica(), f.replica()];
    for (const r of replicas) await r.start();
    const reasons = new Set<string>();
    let retryAfterMissing = 0;
    await constantTraffic(f.clock, replicas, 24 * HOUR, 5_000, (error) => {
      const e = error as GatewayError;
      reasons.add(e?.reason);
      if (!e?.headers?.['Retry-After']) retryAfterMissing++;
    });
    expect(reasons).toEqual(new Set(['UPSTREAM_AUTH_FAILED']));
    expect(retryAfterMissing).toBe(0);
    expect(f.client.logins).toBe(0);
    // 20 s doubling to 15 min: 6 steps of ramp, then one attempt per 15 min (96 a day).
    expect(f.client.loginFailures).toBeGreaterThanOrEqual(90);
    expect(f.client.loginFailures).toBeLessThanOrEqual(110);
    const gauge = await f.metrics.registry.getSingleMetricAsString('upstream_token_backoff_seconds');
    const refusalSeconds = Number(/kind="refusal",account="default"} ([\d.]+)/.exec(gauge)?.[1]);
    expect(refusalSeconds).toBeGreaterThan(0);
    expect(refusalSeconds).toBeLessThanOrEqual(900);
  }, 120_000);

  it('a credential change resets the back-off at once; a success resets the streak for the fleet', async () => {
    const f = fakeFleet({ random: () => 0 });
    f.client.options.password = 'the-real-password';
    const [a, b] = [f.replica(), f.replica()];
    for (const r of [a, b]) await r.start();
    await constantTraffic(f.clock, [a, b], 2 * HOUR, 5_000);
    const failures = f.client.loginFailures;
    await expect(a.getAccessToken()).rejects.toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
    // Long into the streak, the wait is the maximum.
    const retryAfter = await a.getAccessToken().catch((e: GatewayError) => Number(e.headers['Retry-After']));
    expect(retryAfter).toBeGreaterThan(60);

    f.credentials.change('merchant', 'the-real-password');
    const token = await a.getAccessToken();
    expect(token.source).toBe('upstream');
    // The other replica takes the new pair without a login of its own.
    await expect(b.getAccessToken()).resolves.toMatchObject({ value: token.value });
    expect(f.client.logins).toBe(1);
    expect(f.client.loginFailures).toBe(failures);
    // The refusal of the old password may stay in the store (a replica still on it keeps its streak); it holds back
    // no replica on the new one.
    const left = await f.store.get(KEYS.failure);
    if (left !== undefined)
      expect(JSON.parse(left).credentials).not.toBe(f.credentials.current().fingerprint);

    // The streak starts over: a refusal now costs the minimum again, not the maximum.
    f.credentials.change('merchant', 'wrong-again');
    await expect(b.getAccessToken()).rejects.toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
    const again = await a.getAccessToken().catch((e: GatewayError) => Number(e.headers['Retry-After']));
    expect(again).toBe(20);
  });

  it('a refusal of the old password that arrives after a rotation does not hold back the new one', async () => {
    const f = fakeFleet({ random: () => 0 });
    f.client.options.password = 'the-real-password';
    const [a, b] = [f.replica(), f.replica()];
    for (const r of [a, b]) await r.start();
    f.client.hold();
    const onTheWire = a.getAccessToken().catch((error: unknown) => error);
    await settle();
    // The operator fixes the password while the login with the old one is still on the wire.
    f.credentials.change('merchant', 'the-real-password');
    f.client.release();
    await expect(onTheWire).resolves.toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
    expect(await f.store.get(KEYS.failure)).toBeUndefined();
    await expect(b.getAccessToken()).resolves.toMatchObject({ source: 'upstream' });
    await expect(a.getAccessToken()).resolves.toMatchObject({ source: 'memory' });
  });

  it('with the store down, each replica still backs off exponentially from memory', async () => {
    const f = fakeFleet({ random: () => 0, store: brokenStore });
    f.client.options.password = 'the-real-password';
    const replicas = [f.replica(), f.replica(), f.replica()];
    for (const r of replicas) await r.start();
    await constantTraffic(f.clock, replicas, HOUR, 1_000);
    // Per replica: 20+40+80+160+320+640 s = 21 min, then 900 s waits: 8 or 9 attempts in an hour.
    expect(f.client.loginFailures).toBeLessThanOrEqual(3 * 9);
    expect(f.client.loginFailures).toBeGreaterThanOrEqual(3 * 7);
  });
});

describe('an upstream that issues tokens and refuses every call made with them', () => {
  /** Callers as the forwarder drives them: a token, a 401, one renewal, a 401 again (the provider refuses them all). */
  async function rejectedCalls(
    clock: FakeClock,
    replicas: TokenProvider[],
    durationMs: number,
    stepMs: number,
  ) {
    const reasons = new Set<string>();
    for (let t = 0; t < durationMs; t += stepMs) {
      for (const replica of replicas) {
        replica
          .getAccessToken()
          .then((token) => replica.renewAfterRejection(token.value))
          .then((renewed) => replica.renewAfterRejection(renewed.value))
          .catch((error: GatewayError) => reasons.add(error.reason));
      }
      await clock.advance(stepMs);
    }
    return reasons;
  }

  it('24 h of caller traffic on 3 replicas cost at most 110 logins, not one per request', async () => {
    const f = fakeFleet({ random: Math.random });
    const replicas = [f.replica(), f.replica(), f.replica()];
    for (const r of replicas) await r.start();
    const reasons = await rejectedCalls(f.clock, replicas, 24 * HOUR, 5_000);
    expect(reasons).toEqual(new Set(['UPSTREAM_AUTH_FAILED']));
    // Logins succeed each time; the tokens they give are refused, so the fleet backs off as after refused logins.
    expect(f.client.logins + f.client.refreshes).toBeGreaterThan(3);
    expect(f.client.logins + f.client.refreshes).toBeLessThanOrEqual(110);
  }, 120_000);

  it('the streak is shared by the fleet: a login elsewhere neither ends nor restarts it; an accepted call ends it', async () => {
    const f = fakeFleet({ random: () => 0 });
    const [a, b] = [f.replica(), f.replica()];
    await a.start();
    await b.start();
    const first = await a.getAccessToken();
    const renewed = await a.renewAfterRejection(first.value);
    await expect(a.renewAfterRejection(renewed.value)).rejects.toMatchObject({
      headers: { 'Retry-After': '20' },
    });
    await settle();
    // The other replica held the renewed token too: refused at once, no token call.
    const calls = () => f.client.logins + f.client.refreshes;
    const before = calls();
    await expect(b.renewAfterRejection(renewed.value)).rejects.toMatchObject({
      reason: 'UPSTREAM_AUTH_FAILED',
    });
    expect(calls()).toBe(before);
    // After the wait it gets a new token (the token call succeeds): that ends nothing for the fleet.
    await f.clock.advance(21_000);
    const third = await b.getAccessToken();
    expect(calls()).toBe(before + 1);
    expect(await f.store.get(KEYS.failure)).toBeDefined();
    // The provider refuses that one too: the streak goes on (a longer wait), it does not start over.
    await expect(b.renewAfterRejection(third.value)).rejects.toMatchObject({
      headers: { 'Retry-After': '40' },
    });
    // The provider accepts a call again: the fleet's record is gone, a later single rejection is renewed at once.
    await f.clock.advance(41_000);
    const fourth = await b.getAccessToken();
    b.accepted?.();
    await settle();
    expect(await f.store.get(KEYS.failure)).toBeUndefined();
    await expect(b.renewAfterRejection(fourth.value)).resolves.toMatchObject({ source: expect.any(String) });
  });

  it('a single rejected token is renewed at once, and an accepted call ends a streak of rejected ones', async () => {
    const f = fakeFleet({ random: Math.random });
    const replica = f.replica();
    await replica.start();
    // A revoked token (one rejection): renewed at once, no back-off.
    const first = await replica.getAccessToken();
    const renewed = await replica.renewAfterRejection(first.value);
    expect(renewed.value).not.toBe(first.value);
    replica.accepted?.();
    // Later the renewed token is revoked too: after an accepted call that is a new, single rejection.
    const again = await replica.renewAfterRejection(renewed.value);
    expect(again.value).not.toBe(renewed.value);
    // Its renewal refused at once as well: the provider refuses what it issues; the fleet waits the minimum.
    await expect(replica.renewAfterRejection(again.value)).rejects.toMatchObject({
      reason: 'UPSTREAM_AUTH_FAILED',
      headers: { 'Retry-After': expect.any(String) },
    });
    const calls = f.client.logins + f.client.refreshes;
    await expect(replica.getAccessToken()).rejects.toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
    expect(f.client.logins + f.client.refreshes).toBe(calls);
    // After the wait a new token is fetched; the provider accepts it: the streak is over.
    await f.clock.advance(30_000);
    const healed = await replica.getAccessToken();
    replica.accepted?.();
    expect(healed.value).not.toBe(again.value);
    const next = await replica.renewAfterRejection(healed.value);
    expect(next.value).not.toBe(healed.value);
  });
});

describe('transient token-endpoint failures: a short back-off of their own', () => {
  it('5xx and timeouts back off briefly, never count as refusals, and the first refusal after them waits the minimum', async () => {
    const f = fakeFleet({ random: () => 0 });
    const [a, b] = [f.replica(), f.replica()];
    for (const r of [a, b]) await r.start();
    f.client.failWith = new GatewayError('UPSTREAM_UNAVAILABLE', 'HTTP 503');
    const seen = new Set<string>();
    await constantTraffic(f.clock, [a, b], 10 * 60_000, 100, (e) => seen.add((e as GatewayError)?.reason));
    expect(seen).toEqual(new Set(['UPSTREAM_UNAVAILABLE']));
    // 1 s doubling to 30 s over 10 min: about 25 calls, not one per request (12 000 requests).
    expect(f.client.loginFailures).toBeLessThanOrEqual(30);
    expect(f.client.loginFailures).toBeGreaterThanOrEqual(15);
    expect(a.status().lastFailure).toBe('UPSTREAM_UNAVAILABLE');

    f.client.failWith = new GatewayError('UPSTREAM_TIMEOUT', 'slow');
    await f.clock.advance(31_000);
    await expect(a.getAccessToken()).rejects.toMatchObject({ reason: 'UPSTREAM_TIMEOUT' });

    // Now the credentials are refused: the refusal back-off starts at its minimum (the streak was not theirs).
    f.client.failWith = undefined;
    f.client.options.password = 'rotated-at-the-provider';
    await f.clock.advance(31_000);
    await expect(b.getAccessToken()).rejects.toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED' });
    const retryAfter = await a.getAccessToken().catch((e: GatewayError) => e.headers['Retry-After']);
    expect(retryAfter).toBe('20');
  });

  it('a 429 is honoured for its Retry-After by every replica', async () => {
    const f = fakeFleet({ random: () => 0 });
    const [a, b, c] = [f.replica(), f.replica(), f.replica()];
    for (const r of [a, b, c]) await r.start();
    f.client.failWith = new GatewayError('UPSTREAM_UNAVAILABLE', 'HTTP 429', {
      headers: { 'Retry-After': '120' },
    });
    await expect(a.getAccessToken()).rejects.toMatchObject({
      reason: 'UPSTREAM_UNAVAILABLE',
      headers: { 'Retry-After': '120' },
    });
    f.client.failWith = undefined;
    await constantTraffic(f.clock, [a, b, c], 119_000, 1_000);
    expect(f.client.loginFailures).toBe(1);
    expect(f.client.logins).toBe(0);
    await f.clock.advance(1_001);
    await expect(c.getAccessToken()).resolves.toMatchObject({ source: 'upstream' });
    expect(f.client.logins).toBe(1);
  });

  it('the background refresh cannot bypass it: a valid token keeps serving, refreshes are spaced by the back-off', async () => {
    const f = fakeFleet({ random: () => 0 });
    const a = f.replica();
    await a.start();
    await a.getAccessToken();
    f.client.failWith = new GatewayError('UPSTREAM_UNAVAILABLE', 'HTTP 502');
    // The 300 s token is refreshed from 60 s before its end; for those 55 s the refresh keeps failing.
    await f.clock.advance(240_000 + 50_000);
    await expect(a.getAccessToken()).resolves.toMatchObject({ source: 'memory' });
    // 1+2+4+8+16 s of waits fit in 50 s: at most 6 calls, not one every 200 ms.
    expect(f.client.refreshFailures + f.client.loginFailures).toBeLessThanOrEqual(6);
    expect(f.client.refreshFailures + f.client.loginFailures).toBeGreaterThanOrEqual(3);
  });
});
