// One judge of whether a Redis keeps the usage ledger and the quota counters: the doctor, /readyz and the deploy
// tests all ask it.
import { durabilityOfServerSettings, judgeDurability } from '../../../src/store/redis-durability';

const shipped = durabilityOfServerSettings([
  ['--appendonly', 'yes'],
  ['--appendfsync', 'everysec'],
  ['--save', ''],
  ['--maxmemory-policy', 'noeviction'],
]);

describe('judgeDurability', () => {
  test('append-only, fsync every second, noeviction: durable', () => {
    expect(judgeDurability(shipped).state).toBe('durable');
  });

  test('no append-only file and no snapshots: not durable, naming persistence', () => {
    const verdict = judgeDurability({ ...shipped, appendonly: 'no' });
    expect(verdict).toMatchObject({
      state: 'not-durable',
      detail: expect.stringContaining('persistence is off'),
    });
  });

  test.each(['allkeys-lru', 'volatile-lru', 'volatile-ttl', 'allkeys-random'])(
    '%s with a maxmemory: not durable (ledger days and quota counters have expiries too)',
    (policy) => {
      const verdict = judgeDurability({ ...shipped, maxmemoryPolicy: policy, maxmemory: 256 * 2 ** 20 });
      expect(verdict).toMatchObject({ state: 'not-durable', detail: expect.stringContaining(policy) });
    },
  );

  test('snapshots only, appendfsync no, or an evicting policy without maxmemory: weak, a warning', () => {
    expect(judgeDurability({ ...shipped, appendonly: 'no', save: '3600 1' }).state).toBe('weak');
    expect(judgeDurability({ ...shipped, appendfsync: 'no' }).state).toBe('weak');
    expect(judgeDurability({ ...shipped, maxmemoryPolicy: 'allkeys-lru', maxmemory: 0 }).state).toBe('weak');
  });

  test("Redis' own defaults (snapshots, no append-only file) are not what the deployment ships", () => {
    expect(judgeDurability(durabilityOfServerSettings([])).state).toBe('weak');
  });
});
