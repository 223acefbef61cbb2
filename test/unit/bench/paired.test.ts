// Paired comparisons: ratios and CPU differences taken round by round, never across rounds.
import {
  formatAgainstCeiling,
  formatComparison,
  pairedComparison,
  pairedCpuDelta,
  pairedRatio,
} from '../../../bench/lib/paired';

const rounds = (...pairs: Array<[number, number | null]>) =>
  pairs.map(([rps, cpuMsPerRequest]) => ({ rps, cpuMsPerRequest }));

describe('pairedRatio', () => {
  test('is the median of the per-round ratios, with the lowest and highest round and the ratio of the medians', () => {
    // Round 2 is a slow moment for both: per round the ratio stays 0.9 or so.
    const gateway = rounds([900, null], [450, null], [1000, null]);
    const bare = rounds([1000, null], [500, null], [1000, null]);
    expect(pairedRatio(gateway, bare)).toEqual({ median: 0.9, min: 0.9, max: 1, ofMedians: 0.9 });
  });

  test('skips rounds the other target lacks and is null when no round pairs', () => {
    expect(pairedRatio(rounds([800, null], [900, null]), rounds([1000, null]))).toMatchObject({
      median: 0.8,
    });
    expect(pairedRatio(rounds([800, null]), [])).toBeNull();
    expect(pairedRatio(rounds([800, null]), rounds([0, null]))).toBeNull();
  });
});

describe('pairedComparison', () => {
  test('gives the CPU difference per request in µs round by round and counts the rounds the compared build was cheaper', () => {
    const gateway = rounds([1000, 0.18], [1000, 0.2], [1000, 0.19], [1000, null]);
    const compare = rounds([1050, 0.175], [990, 0.203], [1100, 0.18], [1000, 0.1]);
    const c = pairedComparison(compare, gateway);
    // The round without the gateway's CPU is left out.
    expect(c.cpuUsPerRequestDelta).toEqual({ median: -5, min: -10, max: 3, roundsCheaper: 2, rounds: 3 });
    expect(c.throughput?.median).toBe(1.025);
    expect(formatComparison('validation POST', c)).toBe(
      '  validation POST      req/s 1.025 [0.990-1.100]; of medians 1.025; CPU µs/req -5.0 [-10.0 to +3.0], lower in 2/3 rounds',
    );
  });
});

describe('pairedCpuDelta', () => {
  test("gives one target's CPU per request over another's in µs, round by round, and null without a measured pair", () => {
    const bare = rounds([3000, 0.09], [3100, 0.1], [2900, 0.095]);
    const gateway = rounds([2000, 0.16], [2100, 0.175], [1900, 0.17]);
    expect(pairedCpuDelta(gateway, bare)).toEqual({
      median: 75,
      min: 70,
      max: 75,
      roundsCheaper: 0,
      rounds: 3,
    });
    expect(pairedCpuDelta(rounds([1, null]), rounds([1, 0.1]))).toBeNull();
  });
});

describe('formatAgainstCeiling', () => {
  const delta = (median: number, min: number, max: number) => ({
    median,
    min,
    max,
    roundsCheaper: 0,
    rounds: 3,
  });

  test('reads the median round against the promised ceiling and says whether every round agrees', () => {
    expect(formatAgainstCeiling(delta(56, 40, 70), 10)).toBe(
      '+56.0 [+40.0 to +70.0], lower in 0/3 rounds: OVER the promise (at most 10 µs); every round agrees',
    );
    expect(formatAgainstCeiling(delta(8, 2, 12), 10)).toBe(
      '+8.0 [+2.0 to +12.0], lower in 0/3 rounds: within the promise (at most 10 µs); the rounds disagree',
    );
    // At the ceiling is within it.
    expect(formatAgainstCeiling(delta(10, 10, 10), 10)).toContain('within the promise');
    expect(formatAgainstCeiling(null, 10)).toBe('n/a');
  });
});
