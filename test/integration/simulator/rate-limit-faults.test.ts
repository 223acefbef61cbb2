// The simulator plays the provider's rate limit: per-second 429s with and without Retry-After, a one-shot 429,
// and the calls it received each second, read through the control API.
import request from 'supertest';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';

const PLAN = '/api/subscriptions/plan/1f0e2b1c-3c4d-4e5f-8a9b-0c1d2e3f4a5b';

describe('simulator rate-limit faults', () => {
  let simulator: RunningSimulator;
  let now = 1_800_000_000_000;

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0 }, { now: () => now });
  });
  beforeEach(() => simulator.reset());
  afterAll(() => simulator.close());

  test('calls beyond the per-second limit get 429 without Retry-After; the next second starts afresh', async () => {
    await request(simulator.url).post('/__simulator/faults').send({ rateLimitPerSecond: 2 }).expect(200);
    const statuses = [];
    for (let i = 0; i < 4; i += 1) {
      const answer = await request(simulator.url).get(PLAN);
      statuses.push(answer.status);
      if (answer.status === 429) expect(answer.headers['retry-after']).toBeUndefined();
    }
    expect(statuses).toEqual([401, 401, 429, 429]); // 401: no token, but the call was received
    now += 1_000;
    expect((await request(simulator.url).get(PLAN)).status).toBe(401);
    const counts = (await request(simulator.url).get('/__simulator/calls-per-second').expect(200)).body;
    expect(counts).toEqual([
      { second: 1_800_000_000, calls: 4, rateLimited: 2 },
      { second: 1_800_000_001, calls: 1, rateLimited: 0 },
    ]);
  });

  test('with rateLimitRetryAfterSeconds, the 429s carry Retry-After', async () => {
    simulator.setFaults({ rateLimitPerSecond: 1, rateLimitRetryAfterSeconds: 2 });
    now += 1_000;
    await request(simulator.url).get(PLAN).expect(401);
    const refused = await request(simulator.url).get(PLAN).expect(429);
    expect(refused.headers['retry-after']).toBe('2');
  });

  test('next429RetryAfterSeconds answers one call 429 with Retry-After: N, then clears itself', async () => {
    simulator.setFaults({ next429RetryAfterSeconds: 3 });
    const first = await request(simulator.url).get(PLAN).expect(429);
    expect(first.headers['retry-after']).toBe('3');
    await request(simulator.url).get(PLAN).expect(401);
  });

  test('hostile settings are refused with 400', async () => {
    await request(simulator.url).post('/__simulator/faults').send({ rateLimitPerSecond: 0 }).expect(400);
    await request(simulator.url)
      .post('/__simulator/faults')
      .send({ next429RetryAfterSeconds: -1 })
      .expect(400);
  });
});
