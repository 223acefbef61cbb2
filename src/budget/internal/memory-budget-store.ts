// The budget store of one process (local mode, no Redis): the fleet state in memory, signals to its own listeners.
import type { BudgetStore, FleetSignal } from './budget-store';
import { emptyFleetRecord, exchangeWithFleet } from './fleet-state';

/** One store per account; budgets that share it (tests standing for replicas) share the fleet state. */
export function createMemoryBudgetStore(): BudgetStore {
  const fleet = emptyFleetRecord();
  const listeners = new Set<(signal: FleetSignal) => void>();
  return {
    kind: 'memory',
    exchange: async (request) => exchangeWithFleet(fleet, request),
    async publish(signal) {
      // Delivered asynchronously, as Redis does: a publisher never re-enters its own listener synchronously.
      queueMicrotask(() => {
        for (const listener of listeners) listener(signal);
      });
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async leave(replicaId) {
      fleet.replicas.delete(replicaId);
    },
  };
}
