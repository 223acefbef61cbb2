// The lease of a claim (SPEC §13) against the longest path a keyed request can legitimately take in the forwarder:
// a lease that ends while the first call is still out tells a repeat "outcome unknown" for a request still running.
import { forwardLimitMs } from '../../../src/gateway';

const config = {
  upstream: { timeoutMs: 10_000, queueTimeoutMs: 1_000, budget: { waitMs: 250, retryAfterMaxSeconds: 120 } },
  tokens: { lockWaitMs: 5_000 },
} as Parameters<typeof forwardLimitMs>[0];

describe('forwardLimitMs (the lease before its margin)', () => {
  test('covers the 401 path: budget, token (lock wait, refresh, login), socket and attempt, twice', () => {
    const accountTimeoutMs = 10_000;
    const operationTimeoutMs = 2_000;
    // forwarder.ts: admit → getAccessToken → slots.run(attempt) → 401 → admit again → renewAfterRejection →
    // slots.run(attempt); a token fetch is a refresh then a login, each at the account's timeout (token client).
    const onePass = 250 + 5_000 + 2 * accountTimeoutMs + 1_000 + operationTimeoutMs;
    expect(forwardLimitMs(config, accountTimeoutMs, operationTimeoutMs)).toBeGreaterThanOrEqual(2 * onePass);
  });

  test("an operation's short timeout does not shorten the token calls, which run at the account's", () => {
    expect(forwardLimitMs(config, 10_000, 500)).toBeGreaterThanOrEqual(2 * (2 * 10_000 + 500));
  });
});
