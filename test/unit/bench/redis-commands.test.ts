// Redis commands per 1,000 requests from two INFO commandstats readings.
import { commandsPer1k } from '../../../bench/lib/redis-commands';

describe('commandsPer1k', () => {
  it('charges only what was served between the readings, per 1,000 requests, by command', () => {
    const before = { evalsha: 10, get: 5, publish: 1 };
    const after = { evalsha: 30, get: 5, publish: 1, set: 4 };
    expect(commandsPer1k(before, after, 2_000)).toEqual({ total: 12, byCommand: { evalsha: 10, set: 2 } });
  });

  it('is zero when nothing was sent', () => {
    expect(commandsPer1k({ get: 3 }, { get: 3 }, 500)).toEqual({ total: 0, byCommand: {} });
  });
});
