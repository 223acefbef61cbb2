// Provider budgets in front of the simulator playing the provider's per-second limit: the fleet learns it (AIMD).
import type { ProviderBudget } from '../../../src/budget';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { type BudgetReplica, budgetReplica } from '../../support/budget-replicas';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

const PLAN = '/api/subscriptions/plan/1f0e2b1c-3c4d-4e5f-8a9b-0c1d2e3f4a5b';

describe('provider budget against the simulator', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  const replicas: BudgetReplica[] = [];

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([startRedisServer(), startSimulator({ port: 0 })]);
  });
  afterAll(async () => {
    for (const r of replicas) await r.close();
    await Promise.all([redis.stop(), simulator.close()]);
  });

  /** One call through the budget: admitted calls reach the simulator, whose answer the budget observes. */
  async function call(budget: ProviderBudget): Promise<void> {
    const admission = await budget.admit('critical');
    if (!admission.granted) return;
    const answer = await fetch(simulator.url + PLAN);
    await answer.arrayBuffer();
    budget.observe(answer.status, answer.headers.get('retry-after') ?? undefined);
  }

  test('sustained 429s without Retry-After at a real limit: the learned rate settles within 20 % under it and the 429s stop', async () => {
    const limit = 30;
    simulator.setFaults({ rateLimitPerSecond: limit });
    for (let i = 0; i < 2; i += 1) replicas.push(await budgetReplica(redis.url, 'learning', undefined));
    // Demand at about twice the provider's limit, from both replicas; no budget configured: unbounded at first.
    const start = Date.now();
    const inFlight = new Set<Promise<void>>();
    while (Date.now() - start < 24_000) {
      for (const r of replicas)
        for (let k = 0; k < 3; k += 1) {
          const p = call(r.budget).finally(() => inFlight.delete(p));
          inFlight.add(p);
        }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await Promise.all(inFlight);
    const counts = simulator.callsPerSecond();
    const lastSeconds = counts.filter(
      (c) =>
        c.second >= Math.floor((start + 15_000) / 1000) && c.second < Math.floor((start + 24_000) / 1000),
    );
    console.log(
      JSON.stringify(counts.map((c) => [c.calls, c.rateLimited])),
      replicas[0].budget.snapshot().effectiveRate,
    );
    expect(counts.some((c) => c.rateLimited > 0)).toBe(true); // it had to learn
    expect(lastSeconds.length).toBeGreaterThanOrEqual(8);
    // The simulator runs in this process: a stalled event loop moves calls granted in one second into the next,
    // which a per-second limit can answer 429. Such strays stay rare; a fleet still probing above the limit would
    // draw one in every second.
    const calls = lastSeconds.reduce((sum, c) => sum + c.calls, 0);
    const refused = lastSeconds.reduce((sum, c) => sum + c.rateLimited, 0);
    expect(refused / calls).toBeLessThanOrEqual(0.05);
    expect(lastSeconds.filter((c) => c.rateLimited > 0).length).toBeLessThanOrEqual(3);
    // Critical callers may use the whole rate: the provider receives about the learned rate in a typical second. The
    // median, not the mean: a second in which this process stalled sends fewer calls (seen: 12 of 30 on a loaded
    // machine, the learned rate 28), and the calls it did not make are not owed to the next second.
    const perSecond = lastSeconds.map((c) => c.calls).sort((a, b) => a - b);
    expect(perSecond[Math.floor(perSecond.length / 2)]).toBeGreaterThanOrEqual(limit * 0.8);
    const learned = replicas[0].budget.snapshot().effectiveRate ?? Number.POSITIVE_INFINITY;
    expect(learned).toBeLessThanOrEqual(limit);
    expect(learned).toBeGreaterThanOrEqual(limit * 0.8);
  }, 40_000);
});
