// Operation calls the simulator received in each wall-clock second, and how many it refused 429: what a provider
// with a per-second rate limit counts (read by the budget's tests through /__simulator/calls-per-second).

export interface SecondCount {
  /** Unix time in seconds. */
  readonly second: number;
  readonly calls: number;
  /** Answered 429 by the played rate limit or a one-shot 429. */
  readonly rateLimited: number;
}

/** The last this many seconds are kept. */
const KEPT_SECONDS = 300;

export interface CallsPerSecond {
  /** Counts one call in the current second; returns how many this second has received, this one included. */
  count(): number;
  rateLimited(): void;
  list(): SecondCount[];
  clear(): void;
}

export function createCallsPerSecond(now: () => number = Date.now): CallsPerSecond {
  const seconds = new Map<number, { calls: number; rateLimited: number }>();
  const current = () => {
    const second = Math.floor(now() / 1000);
    let entry = seconds.get(second);
    if (!entry) {
      entry = { calls: 0, rateLimited: 0 };
      seconds.set(second, entry);
      for (const old of seconds.keys()) if (old <= second - KEPT_SECONDS) seconds.delete(old);
    }
    return entry;
  };
  return {
    count() {
      const entry = current();
      entry.calls += 1;
      return entry.calls;
    },
    rateLimited() {
      current().rateLimited += 1;
    },
    list: () =>
      [...seconds.entries()]
        .sort(([a], [b]) => a - b)
        .map(([second, { calls, rateLimited }]) => ({ second, calls, rateLimited })),
    clear: () => seconds.clear(),
  };
}
