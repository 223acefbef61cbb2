// The window of the circuit breaker under a fake clock: calls leave it when their time has passed, whatever came since.
import { CircuitState } from 'cockatiel';
import { SlidingWindowBreaker } from '../../../src/forwarding/internal/sliding-window-breaker';

const settings = { failureRatio: 0.5, windowMs: 10_000, minimumCalls: 10 };

function breakerAt(start: number) {
  let now = start;
  const breaker = new SlidingWindowBreaker(settings, () => now);
  const fail = (times: number) => {
    let opens = false;
    for (let i = 0; i < times; i++) opens = breaker.failure(CircuitState.Closed);
    return opens;
  };
  return { breaker, fail, advance: (ms: number) => (now += ms) };
}

describe('SlidingWindowBreaker', () => {
  it('opens on the ratio once the window holds the minimum of calls', () => {
    const { breaker, fail } = breakerAt(1_000_000);
    for (let i = 0; i < 5; i++) breaker.success(CircuitState.Closed);
    expect(fail(5)).toBe(false); // 5 of 10: not above one half
    expect(fail(1)).toBe(true);
  });

  it('forgets calls older than the window after a quiet spell, even with a single call since', () => {
    const { fail, advance } = breakerAt(1_000_000);
    expect(fail(9)).toBe(false);
    advance(3_600_000);
    expect(fail(9)).toBe(false);
    expect(fail(1)).toBe(true);
  });

  it('keeps the calls of the last window as time moves through it', () => {
    const { fail, advance } = breakerAt(1_000_000);
    fail(5);
    advance(6_000);
    expect(fail(5)).toBe(true);
  });

  it('a clock stepping back counts the call in the newest slice instead of losing the window', () => {
    const { fail, advance } = breakerAt(1_000_000);
    fail(5);
    advance(-60_000);
    expect(fail(5)).toBe(true);
  });

  it('keeps its own steady time: a wall clock stepped back an hour does not keep old failures in the window', () => {
    jest.useFakeTimers({ now: 1_000_000 });
    try {
      const breaker = new SlidingWindowBreaker(settings);
      const fail = (times: number) => {
        let opens = false;
        for (let i = 0; i < times; i++) opens = breaker.failure(CircuitState.Closed);
        return opens;
      };
      fail(5);
      jest.setSystemTime(Date.now() - 3_600_000);
      jest.advanceTimersByTime(settings.windowMs + 1_000);
      expect(fail(5)).toBe(false);
    } finally {
      jest.useRealTimers();
    }
  });

  it('a successful probe closes with an empty window', () => {
    const { breaker, fail } = breakerAt(1_000_000);
    fail(9);
    breaker.success(CircuitState.HalfOpen);
    expect(fail(8)).toBe(false);
  });
});
