import type { Options } from 'express-rate-limit';
import { MAX_LEASES, QuotaLeaseStore } from '../../../src/callers/quota-lease-store';
import type { RedisClient } from '../../../src/store/redis-connection';

/** The claim script's answer for a first claim of one hit in a fresh 5-minute window (no Redis needed here). */
const fakeRedis = { eval: async () => [1, 300_000] } as unknown as RedisClient;

function store(): QuotaLeaseStore {
  const leases = new QuotaLeaseStore({ redis: fakeRedis, prefix: 'unit:', limit: 20 });
  leases.init({ windowMs: 300_000 } as Options);
  return leases;
}

/** Keys held by the store (its private lease map). */
const heldKeys = (leases: QuotaLeaseStore) =>
  (leases as unknown as { leases: Map<string, unknown> }).leases.size;

describe('QuotaLeaseStore under a flood of distinct keys (failed authentications from many addresses)', () => {
  afterEach(() => jest.restoreAllMocks());

  it('sweeps its leases a few times, not once per new key, while every window is still running', async () => {
    const sweep = jest.spyOn(QuotaLeaseStore.prototype as unknown as { sweep(now: number): void }, 'sweep');
    const leases = store();
    for (let i = 0; i < 25_000; i++) await leases.increment(`203.0.113.${i}`);
    // Before: one full pass over the map for every key past 10 000 (15 000 passes, quadratic CPU).
    expect(sweep.mock.calls.length).toBeLessThanOrEqual(3);
  });

  it('holds at most MAX_LEASES keys: the oldest are forgotten, their hits stay counted in Redis', async () => {
    const leases = store();
    for (let i = 0; i < MAX_LEASES + 1_000; i++) await leases.increment(`key-${i}`);
    expect(heldKeys(leases)).toBeLessThanOrEqual(MAX_LEASES);
    // A forgotten key simply claims again from the shared counter at its next request.
    await expect(leases.increment('key-0')).resolves.toMatchObject({ totalHits: 1 });
  });
});
