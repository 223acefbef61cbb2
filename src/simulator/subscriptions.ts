// Seeded subscriptions: the provider's third operation (GET /api/subscriptions/{id}), which the shipped catalogue does
// not declare, so a newcomer can declare it (README, "Adding a provider operation").
import { SEED_PLAN_ID } from './plans';

export interface Subscription {
  id: string;
  planId: string;
  status: 'ACTIVE' | 'CANCELLED';
  startedAt: string;
  nextChargeAt: string | null;
  /** The provider's internal field: a strict catalogue entry that does not document it keeps it from callers. */
  riskScore: number;
}

export const SEED_SUBSCRIPTION_ID = 'sub_7Hq2Lm9X';

const SUBSCRIPTIONS: readonly Subscription[] = [
  {
    id: SEED_SUBSCRIPTION_ID,
    planId: SEED_PLAN_ID,
    status: 'ACTIVE',
    startedAt: '2026-01-15T12:00:00Z',
    nextChargeAt: '2026-12-15T12:00:00Z',
    riskScore: 0.12,
  },
  {
    id: 'sub_3Kd8Pq1Z',
    planId: SEED_PLAN_ID,
    status: 'CANCELLED',
    startedAt: '2025-06-01T09:30:00Z',
    nextChargeAt: null,
    riskScore: 0.71,
  },
];

export function findSubscription(id: string): Subscription | undefined {
  return SUBSCRIPTIONS.find((subscription) => subscription.id === id);
}
