import { createMemoryTokenStore } from '../../../src/store/memory-token-store';

function clocked() {
  let now = 1_000;
  const store = createMemoryTokenStore({ now: () => now });
  return { store, tick: (ms: number) => (now += ms) };
}

describe('memory token store', () => {
  it('expires values after their TTL', async () => {
    const { store, tick } = clocked();
    await store.set('k', 'v', 100);
    expect(await store.get('k')).toBe('v');
    tick(100);
    expect(await store.get('k')).toBeUndefined();
  });

  it('compare-and-delete deletes only the expected value', async () => {
    const { store } = clocked();
    await store.set('k', 'new', 1000);
    expect(await store.compareAndDelete('k', 'old')).toBe(false);
    expect(await store.get('k')).toBe('new');
    expect(await store.compareAndDelete('k', 'new')).toBe(true);
    expect(await store.get('k')).toBeUndefined();
  });

  it('the lock has one owner, is released only by it, and its lease expires', async () => {
    const { store, tick } = clocked();
    expect(await store.acquireLock('lock', 'a', 500)).toBe(true);
    expect(await store.acquireLock('lock', 'b', 500)).toBe(false);
    expect(await store.releaseLock('lock', 'b')).toBe(false);
    expect(await store.extendLock?.('lock', 'b', 500)).toBe(false);
    expect(await store.extendLock?.('lock', 'a', 1000)).toBe(true);
    tick(600);
    expect(await store.acquireLock('lock', 'b', 500)).toBe(false);
    tick(500);
    expect(await store.acquireLock('lock', 'b', 500)).toBe(true);
    expect(await store.releaseLock('lock', 'a')).toBe(false);
    expect(await store.releaseLock('lock', 'b')).toBe(true);
  });

  it('delivers notifications asynchronously to subscribers until they unsubscribe', async () => {
    const { store } = clocked();
    const seen: string[] = [];
    const stop = store.subscribe('ch', (m) => seen.push(m));
    const published = store.publish('ch', 'one');
    expect(seen).toEqual([]);
    await published;
    await Promise.resolve();
    expect(seen).toEqual(['one']);
    stop();
    await store.publish('ch', 'two');
    await Promise.resolve();
    expect(seen).toEqual(['one']);
    expect(store.healthy()).toBe(true);
  });
});
