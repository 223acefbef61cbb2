// Upstream circuit breakers (cockatiel), one per operation: a failure ratio over a sliding window opens one.
import {
  BrokenCircuitError,
  CircuitState,
  circuitBreaker,
  handleWhen,
  IsolatedCircuitError,
} from 'cockatiel';
import type { CircuitSettings } from '../../config/gateway-config';
import { secondsToRetry } from '../../http/gateway-error';
import { OffContractAnswer } from './off-contract-answers';
import { SlidingWindowBreaker } from './sliding-window-breaker';

/** A failure that counts against the circuit: 5xx, timeout, connection error. */
export class UpstreamFailure extends Error {
  constructor(
    readonly kind: 'status' | 'timeout' | 'connection',
    /** The socket error code of a connection failure (ECONNRESET, …). */
    readonly code?: string,
    /** The attempt ended before its request was written on a connection: the provider never saw it. */
    readonly notSent = false,
  ) {
    super(`upstream ${kind} failure`);
  }
}

export type CircuitStateName = 'closed' | 'open' | 'half-open';

export interface UpstreamCircuit {
  /** Runs one upstream attempt; rejects with CircuitOpenError without running it while the circuit is open. */
  run<T>(attempt: () => Promise<T>): Promise<T>;
  readonly state: CircuitStateName;
  readonly retryAfterSeconds: number;
}

export class CircuitOpenError extends Error {
  constructor() {
    super('upstream circuit open');
  }
}

const STATE_NAMES: Record<CircuitState, CircuitStateName> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half-open',
  [CircuitState.Isolated]: 'open',
};

/** cockatiel's own refusals (open, isolated) as the gateway's; any other error as it came. */
function asCircuitOpen(error: unknown): never {
  if (error instanceof BrokenCircuitError || error instanceof IsolatedCircuitError)
    throw new CircuitOpenError();
  throw error;
}

export function createUpstreamCircuit(
  settings: CircuitSettings & { onStateChange?: (state: CircuitStateName) => void },
): UpstreamCircuit {
  const policy = circuitBreaker(
    // An answer outside the contract fails a half-open circuit's probe only (off-contract-answers.ts).
    handleWhen(
      (error) =>
        error instanceof UpstreamFailure ||
        (error instanceof OffContractAnswer && policy.state === CircuitState.HalfOpen),
    ),
    { halfOpenAfter: settings.resetMs, breaker: new SlidingWindowBreaker(settings) },
  );
  if (settings.onStateChange) {
    const notify = settings.onStateChange;
    policy.onStateChange((state) => notify(STATE_NAMES[state]));
  }
  return {
    run(attempt) {
      // Half-open means one probe is already in flight: cockatiel would hold every other call until the probe
      // ends (up to the upstream timeout); they are answered at once instead, like while open.
      if (policy.state === CircuitState.HalfOpen) return Promise.reject(new CircuitOpenError());
      // Not an async frame of its own: a call in flight keeps every frame it waits in alive (issue 40).
      return policy.execute(attempt).catch(asCircuitOpen);
    },
    get state() {
      return STATE_NAMES[policy.state];
    },
    retryAfterSeconds: secondsToRetry(settings.resetMs),
  };
}

/** The circuits of the forwarded operations, by operation name (the exchange's route). */
export interface UpstreamCircuits {
  /** The operation's circuit; an operation not named at creation gets its own on first use. */
  of(operation: string): UpstreamCircuit;
  /** Every operation's state, for readiness. */
  states(): Record<string, CircuitStateName>;
}

/**
 * One circuit per operation: an outage of one upstream endpoint (or a caller's poison requests on it) never stops
 * the other operation.
 */
export function createUpstreamCircuits(
  operations: readonly string[],
  settings: CircuitSettings & { onStateChange?: (operation: string, state: CircuitStateName) => void },
): UpstreamCircuits {
  const circuits = new Map<string, UpstreamCircuit>();
  const create = (operation: string) => {
    const notify = settings.onStateChange;
    const circuit = createUpstreamCircuit({
      ...settings,
      onStateChange: notify && ((state) => notify(operation, state)),
    });
    circuits.set(operation, circuit);
    return circuit;
  };
  for (const operation of operations) create(operation);
  return {
    of: (operation) => circuits.get(operation) ?? create(operation),
    states: () => Object.fromEntries([...circuits].map(([operation, circuit]) => [operation, circuit.state])),
  };
}
