// The back-off for tokens the provider refuses: no false positive on a single revocation or rotation, and a
// recovered provider is trusted again at once.
import { tokenKeys } from '../../../src/keys/redis-keys';
import type { TokenProvider } from '../../../src/tokens/internal/token-provider';
import { fakeFleet, settle, stopManagers, TEST_BASE_URL } from './token-fakes';

const BASE_URL = TEST_BASE_URL;
const KEYS = tokenKeys('bff:', BASE_URL, 'merchant');
afterEach(stopManagers);

const serial = (jwt: string) =>
  Number(JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()).jti.split('-')[1]);

/** The forwarder's sequence: token, call, on 401 renew once and retry once, accepted() on a non-401 answer. */
async function forward(tokens: TokenProvider, accepts: (token: string) => boolean): Promise<string> {
  try {
    const token = await tokens.getAccessToken();
    if (accepts(token.value)) {
      tokens.accepted?.();
      return 'ok';
    }
    const renewed = await tokens.renewAfterRejection(token.value);
    if (accepts(renewed.value)) {
      tokens.accepted?.();
      return 'ok';
    }
    return 'UPSTREAM_AUTH_FAILED';
  } catch (error) {
    return (error as { reason: string }).reason;
  }
}

describe('tokens the provider refuses', () => {
  it('a signing-key rotation after a missed notification costs one renewal, never a fleet-wide refusal', async () => {
    const f = fakeFleet();
    // A's subscription is gone (pub/sub reconnect): it keeps its pair while B refreshes.
    const a = f.replica({ random: () => 0 });
    const b = f.replica({ random: () => 0.99 });
    await b.start();
    const t1 = await a.getAccessToken();
    await settle();
    expect((await b.getAccessToken()).value).toBe(t1.value);
    // B's proactive refresh fires ~6 s before A's; A misses the notification.
    await f.clock.advance(300_000 - 60_000 - 5_900 - 1);
    const t2 = await b.getAccessToken();
    expect(t2.value).not.toBe(t1.value);
    expect((await a.getAccessToken()).value).toBe(t1.value);
    // The provider rotates its signing key now: every token issued so far is refused, new ones are fine.
    const rotatedAfter = Math.max(serial(t1.value), serial(t2.value));
    const accepts = (token: string) => serial(token) > rotatedAfter;
    const before = f.calls();
    // A's first request: 401 -> renewal adopts B's T2 from the store (also pre-rotation) -> 401.
    expect(await forward(a, accepts)).toBe('UPSTREAM_AUTH_FAILED');
    // A's next request: the adopted T2 is renewed normally (a login), not taken for a refusal of fresh tokens.
    expect(await forward(a, accepts)).toBe('ok');
    await settle();
    expect(await forward(b, accepts)).toBe('ok');
    expect(f.calls() - before).toBe(1);
    expect(await f.store.get(KEYS.failure)).toBeUndefined();
  });

  it('after the provider recovers, a late 401 on a replica still in the streak is a single rejection again', async () => {
    const f = fakeFleet();
    const a = f.replica({ random: () => 0 });
    const b = f.replica({ random: () => 0 });
    await a.start();
    await b.start();
    let refusing = true;
    const accepts = () => !refusing;
    // Build a streak of 5 on the fleet.
    for (let i = 0; i < 6; i++) {
      await forward(a, accepts);
      await forward(a, accepts);
      await settle();
      await f.clock.advance(16 * 60_000);
    }
    // Both replicas take the new token after the wait.
    const ta = await a.getAccessToken();
    await settle();
    const tb = await b.getAccessToken();
    expect(tb.value).toBe(ta.value);
    // B sent a call just before the provider recovered (its 401 comes back late); A's call is accepted.
    refusing = false;
    expect(await forward(a, accepts)).toBe('ok');
    await settle();
    expect(await f.store.get(KEYS.failure)).toBeUndefined();
    const late = await b.renewAfterRejection(tb.value).then(
      () => 'renewed',
      (e) => e.headers?.['Retry-After'],
    );
    await settle();
    expect(late).toBe('renewed');
    expect(await forward(b, accepts)).toBe('ok');
    expect(await f.store.get(KEYS.failure)).toBeUndefined();
  }, 60_000);

  it('one revocation, 3 replicas x 5 concurrent requests all 401 at once: no fleet refusal, every retry ok', async () => {
    const f = fakeFleet();
    const rs = [
      f.replica({ random: Math.random }),
      f.replica({ random: Math.random }),
      f.replica({ random: Math.random }),
    ];
    for (const r of rs) await r.start();
    const t1 = await rs[0].getAccessToken();
    await settle();
    for (const r of rs) expect((await r.getAccessToken()).value).toBe(t1.value);
    const revoked = serial(t1.value);
    const accepts = (token: string) => serial(token) > revoked;
    const results = await Promise.all(rs.flatMap((r) => [1, 2, 3, 4, 5].map(() => forward(r, accepts))));
    await settle();
    expect(new Set(results)).toEqual(new Set(['ok']));
    expect(await f.store.get(KEYS.failure)).toBeUndefined();
    // And again a second, later revocation: still a single renewal.
    await f.clock.advance(60_000);
    const t2 = await rs[1].getAccessToken();
    const revoked2 = serial(t2.value);
    const results2 = await Promise.all(
      rs.flatMap((r) => [1, 2, 3].map(() => forward(r, (t) => serial(t) > revoked2))),
    );
    expect(new Set(results2)).toEqual(new Set(['ok']));
    expect(await f.store.get(KEYS.failure)).toBeUndefined();
  });
});
