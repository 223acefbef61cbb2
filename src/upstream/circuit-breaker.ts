// The upstream circuit breaker (cockatiel): opens after consecutive failures, answers fast, probes to close.
import {
  BrokenCircuitError,
  CircuitState,
  ConsecutiveBreaker,
  circuitBreaker,
  handleWhen,
  IsolatedCircuitError,
} from 'cockatiel';

/** A failure that counts against the circuit: 5xx, timeout, connection error. */
export class UpstreamFailure extends Error {
  constructor(
    readonly kind: 'status' | 'timeout' | 'connection',
    /** The socket error code of a connection failure (ECONNRESET, …). */
    readonly code?: string,
  ) {
    super(`upstream ${kind} failure`);
  }
}

export interface UpstreamCircuit {
  /** Runs one upstream attempt; rejects with CircuitOpenError without running it while the circuit is open. */
  run<T>(attempt: () => Promise<T>): Promise<T>;
  readonly state: 'closed' | 'open' | 'half-open';
  readonly retryAfterSeconds: number;
}

export class CircuitOpenError extends Error {
  constructor() {
    super('upstream circuit open');
  }
}

const STATE_NAMES: Record<CircuitState, UpstreamCircuit['state']> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half-open',
  [CircuitState.Isolated]: 'open',
};

export function createUpstreamCircuit(options: {
  failureThreshold: number;
  resetMs: number;
  onStateChange?: (state: UpstreamCircuit['state']) => void;
}): UpstreamCircuit {
  const policy = circuitBreaker(
    handleWhen((error) => error instanceof UpstreamFailure),
    {
      halfOpenAfter: options.resetMs,
      breaker: new ConsecutiveBreaker(options.failureThreshold),
    },
  );
  if (options.onStateChange) {
    const notify = options.onStateChange;
    policy.onStateChange((state) => notify(STATE_NAMES[state]));
  }
  return {
    async run(attempt) {
      try {
        return await policy.execute(attempt);
      } catch (error) {
        if (error instanceof BrokenCircuitError || error instanceof IsolatedCircuitError)
          throw new CircuitOpenError();
        throw error;
      }
    },
    get state() {
      return STATE_NAMES[policy.state];
    },
    retryAfterSeconds: Math.max(1, Math.ceil(options.resetMs / 1000)),
  };
}
