// One exchange with the fleet's budget record (the steps the Redis store runs in Lua): what a 429 teaches the fleet.
import {
  CEILING_MARGIN,
  DECREASE_FACTOR,
  type ExchangeRequest,
  emptyFleetRecord,
  exchangeWithFleet,
  READING_FLOOR,
} from '../../../src/budget/internal/fleet-state';

const T0 = 1_800_000_000_000;
const none = { sheddable: 0, standard: 0, critical: 0 };
const shares = { sheddable: 0.5, standard: 0.8, critical: 1 };

function report(
  replicaId: string,
  now: number,
  accepted: number,
  event: ExchangeRequest['event'],
): ExchangeRequest {
  return {
    replicaId,
    now,
    configuredRate: 30,
    shares,
    demand: { ...none, critical: 60 },
    accepted,
    using: none,
    maxPauseMs: 120_000,
    event,
  };
}

describe('the fleet record learning from a 429 without Retry-After', () => {
  test("a settled 429's ceiling is what the replicas reported accepted, not the even-share bound of the one reporting", () => {
    const fleet = emptyFleetRecord();
    exchangeWithFleet(fleet, report('a', T0, 9, { kind: 'none' }));
    // "b" drew more than its even share: 20 of the fleet's 29 accepted calls a second; 2 x 20 = 40 is no reading.
    const refused = exchangeWithFleet(fleet, report('b', T0 + 500, 20, { kind: 'decrease' }));
    expect(refused.learnedRate).toBeCloseTo(29 * DECREASE_FACTOR);
    expect(fleet.ceiling).toBe(29);
    // A minute of calls accepted: the rate climbs to its margin under that ceiling, and stops there.
    exchangeWithFleet(fleet, report('a', T0 + 30_000, 9, { kind: 'none' }));
    const later = exchangeWithFleet(fleet, report('b', T0 + 60_000, 17, { kind: 'none' }));
    expect(later.learnedRate).toBeCloseTo(29 * CEILING_MARGIN);
  });

  test('a fleet allowed more than it sent falls from what the provider accepted: below the limit at once', () => {
    // Allowed 35.5/s (climbing faster than its calls follow), sending 32/s, refused at the provider's 30/s: 0.85 x
    // 35.5 would leave 30.2/s, still above the limit (CI, 2026-11-27).
    const fleet = emptyFleetRecord();
    exchangeWithFleet(fleet, { ...report('a', T0, 12, { kind: 'none' }), configuredRate: 35.5 });
    const refused = exchangeWithFleet(fleet, {
      ...report('b', T0 + 500, 20, { kind: 'decrease' }),
      configuredRate: 35.5,
    });
    expect(refused.learnedRate).toBeCloseTo(32 * DECREASE_FACTOR);
    expect(refused.learnedRate).toBeLessThan(30);
  });

  test('a reading of a mostly idle interval lowers the rate no further than READING_FLOOR of what was allowed', () => {
    // A burst after a quiet minute: the provider accepted 3 calls a second over the interval, refused the rest.
    const fleet = emptyFleetRecord();
    const refused = exchangeWithFleet(fleet, {
      ...report('a', T0, 3, { kind: 'decrease' }),
      configuredRate: 100,
    });
    expect(refused.learnedRate).toBeCloseTo(100 * READING_FLOOR * DECREASE_FACTOR);
    // Nor is it a ceiling: the rate climbs on while calls are accepted.
    expect(fleet.ceiling).toBeUndefined();
    const later = exchangeWithFleet(fleet, {
      ...report('a', T0 + 3_000, 80, { kind: 'none' }),
      configuredRate: 100,
    });
    expect(later.effectiveRate).toBeGreaterThan(100 * READING_FLOOR * DECREASE_FACTOR);
  });

  test('the first 429 with nothing configured or learned reads the rate from the bound (the others may be a whole interval behind)', () => {
    const fleet = emptyFleetRecord();
    exchangeWithFleet(fleet, { ...report('a', T0, 5, { kind: 'none' }), configuredRate: undefined });
    const refused = exchangeWithFleet(fleet, {
      ...report('b', T0 + 500, 20, { kind: 'decrease' }),
      configuredRate: undefined,
    });
    expect(refused.learnedRate).toBeCloseTo(40 * DECREASE_FACTOR);
    expect(fleet.ceiling).toBeUndefined(); // a reading of what was accepted: no ceiling, the rate climbs on
  });
});
