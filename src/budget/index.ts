// The provider budget's public surface (SPEC §11): one budget per account, shared by the fleet through a store.

export { type RetryAfterReading, readRetryAfter } from '../http/retry-after';
export type { BudgetStore, FleetSignal } from './internal/budget-store';
export { type FleetView, fetchFleetView, readFleetView } from './internal/fleet-view';
export { createMemoryBudgetStore } from './internal/memory-budget-store';
export {
  type Admission,
  type BudgetSnapshot,
  createProviderBudget,
  GRANTED,
  type ProviderBudget,
  type ProviderBudgetOptions,
  type RefusalReason,
} from './internal/provider-budget';
export { createRedisBudgetStore, type RedisBudgetStoreOptions } from './internal/redis-budget-store';
