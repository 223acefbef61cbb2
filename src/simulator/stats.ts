// Counters of what the simulator was asked, read by tests and benchmarks through /__simulator/stats.

export interface SimulatorStats {
  /** Every request on an upstream path (test controls are not counted). */
  requests: number;
  /** Successful logins (`POST /api/token/` answered 200). */
  logins: number;
  /** Logins refused: bad credentials (401) or missing fields (400). */
  loginFailures: number;
  /** Successful refreshes. */
  refreshes: number;
  /** Refreshes refused (400 or 401). */
  refreshFailures: number;
  /** Validation requests that passed authentication (answered 200 or 400). */
  validations: number;
  /** Plan reads that passed authentication (found or not found). */
  planReads: number;
  /** 401 answers on the two operations (no, invalid, expired, revoked or wrong-type access token). */
  unauthorized: number;
  /** 403 answers to callers outside the IP allow-list. */
  forbidden: number;
  /** Requests answered by an injected fault (error status or connection reset). */
  faultsInjected: number;
  /** Statement exports that passed authentication (GET /api/subscriptions/{id}/statement). */
  statements: number;
  /** Statement exports whose connection closed before the whole statement was sent (the reader hung up). */
  statementsCut: number;
}

export type CounterName = keyof SimulatorStats;

/** What one merchant account (by username) was asked: logins, refreshes, and calls made with its tokens. */
export interface AccountStats {
  logins: number;
  loginFailures: number;
  refreshes: number;
  /** Operation calls whose access token was this account's and valid. */
  calls: number;
}

/** The counters, and each merchant account's own (by username). */
export type StatsSnapshot = SimulatorStats & { accounts: Record<string, AccountStats> };

export interface StatsRecorder {
  increment(name: CounterName): void;
  /** Counts for one account (by username; usernames are not secrets). */
  incrementFor(username: string, name: keyof AccountStats): void;
  snapshot(): StatsSnapshot;
  reset(): void;
}

function zero(): SimulatorStats {
  return {
    requests: 0,
    logins: 0,
    loginFailures: 0,
    refreshes: 0,
    refreshFailures: 0,
    validations: 0,
    planReads: 0,
    unauthorized: 0,
    forbidden: 0,
    faultsInjected: 0,
    statements: 0,
    statementsCut: 0,
  };
}

export function createStats(): StatsRecorder {
  let counters = zero();
  let accounts: Record<string, AccountStats> = {};
  return {
    increment(name) {
      counters[name] += 1;
    },
    incrementFor(username, name) {
      accounts[username] ??= { logins: 0, loginFailures: 0, refreshes: 0, calls: 0 };
      accounts[username][name] += 1;
    },
    snapshot: () => ({ ...counters, accounts: structuredClone(accounts) }),
    reset() {
      counters = zero();
      accounts = {};
    },
  };
}
