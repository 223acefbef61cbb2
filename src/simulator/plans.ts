// Seeded subscription plans, including the seed document's example id.

export interface SubscriptionPlan {
  internalId: string;
  name: string;
  description: string;
  amount: number;
  country: string;
  currency: string;
  accountNumber: string;
  autoRecurring: { repetitions: number; type: 'hour'; frequency: number };
  status: { code: string; description: string; detail: string };
}

const ACTIVE = { code: '100', description: 'ACTIVE', detail: 'Plan is active' } as const;

/** The seed's example plan id. */
export const SEED_PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';

export const SEEDED_PLANS: readonly SubscriptionPlan[] = [
  {
    internalId: SEED_PLAN_ID,
    name: 'Premium monthly',
    description: 'Premium features billed every 30 days for a year',
    amount: 1500.5,
    country: 'ARG',
    currency: 'ARS',
    accountNumber: '1000123456',
    autoRecurring: { repetitions: 12, type: 'hour', frequency: 720 },
    status: { ...ACTIVE },
  },
  {
    internalId: '3f2c9a1e-7b4d-4e8a-9c61-0d5e2f7a8b90',
    name: 'Basic weekly',
    description: 'Basic features billed every 7 days',
    amount: 49.9,
    country: 'BRA',
    currency: 'BRL',
    accountNumber: '2000654321',
    autoRecurring: { repetitions: 52, type: 'hour', frequency: 168 },
    status: { ...ACTIVE },
  },
  {
    internalId: '9a7e4c2b-1d3f-4b5a-8e6c-2f1a0b9c8d7e',
    name: 'Daily pass',
    description: 'Full access billed every 24 hours',
    amount: 2990,
    country: 'CHL',
    currency: 'CLP',
    accountNumber: '3000777888',
    autoRecurring: { repetitions: 30, type: 'hour', frequency: 24 },
    status: { ...ACTIVE },
  },
];

const byId = new Map(SEEDED_PLANS.map((plan) => [plan.internalId.toLowerCase(), plan]));

/** A copy of the plan (callers may not mutate the seed), matched case-insensitively; undefined when unknown. */
export function findPlan(internalId: string): SubscriptionPlan | undefined {
  const plan = byId.get(internalId.toLowerCase());
  return plan ? structuredClone(plan) : undefined;
}
