// An account's plan cache follows the merchant it logs in as; a read never mixes two merchants' plans.
import { merchantAnswerCache } from '../../../src/accounts/account';
import { createMemoryAnswerCache } from '../../../src/forwarding/internal/answer-cache';
import type { UpstreamAnswer } from '../../../src/forwarding/internal/forwarder';

const plan = (merchant: string): UpstreamAnswer => ({
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(`{"merchant":"${merchant}"}`),
});

function setUp() {
  let username = 'merchant-a';
  let version = 0;
  const stores = { 'merchant-a': createMemoryAnswerCache(), 'merchant-b': createMemoryAnswerCache() };
  const cache = merchantAnswerCache(
    { current: () => ({ username, password: 'x', fingerprint: 'f' }), changes: () => version },
    (name) => {
      const store = stores[name as keyof typeof stores];
      if (!store) throw new Error(`no store for ${name}`);
      return store;
    },
  );
  return {
    cache,
    stores,
    rotateTo: (name: string) => {
      username = name;
      version += 1;
    },
  };
}

describe('merchant answer cache', () => {
  test('reads and writes go to the store of the username logged in with now', async () => {
    const { cache, stores, rotateTo } = setUp();
    await cache.set('plan:1', plan('a'), 30);
    rotateTo('merchant-b');
    expect(await cache.get('plan:1')).toBeUndefined();
    await cache.set('plan:1', plan('b'), 30);
    expect(await stores['merchant-a'].get('plan:1')).toEqual(plan('a'));
    expect(await stores['merchant-b'].get('plan:1')).toEqual(plan('b'));
  });

  test('a read pinned before a rotation keeps nothing: its answer may come from either merchant (found by the adversarial read)', async () => {
    const { cache, stores, rotateTo } = setUp();
    const pinned = cache.pin?.();
    if (!pinned) throw new Error('the merchant cache pins');
    expect(await pinned.get('plan:1')).toBeUndefined();
    rotateTo('merchant-b'); // the call then went out with B's token (or A's 401 was renewed as B)
    await pinned.set('plan:1', plan('b'), 30);
    expect(await stores['merchant-a'].get('plan:1')).toBeUndefined();
    expect(await stores['merchant-b'].get('plan:1')).toBeUndefined();
  });

  test('a read pinned before the credentials changed and changed back keeps nothing: its token may have been the other merchant', async () => {
    const { cache, stores, rotateTo } = setUp();
    const pinned = cache.pin?.();
    if (!pinned) throw new Error('the merchant cache pins');
    rotateTo('merchant-b');
    rotateTo('merchant-a');
    await pinned.set('plan:1', plan('b'), 30);
    expect(await stores['merchant-a'].get('plan:1')).toBeUndefined();
    expect(await stores['merchant-b'].get('plan:1')).toBeUndefined();
  });

  test('a read with no rotation keeps its answer in its merchant store', async () => {
    const { cache, stores } = setUp();
    await cache.pin?.().set('plan:1', plan('a'), 30);
    expect(await stores['merchant-a'].get('plan:1')).toEqual(plan('a'));
  });
});
