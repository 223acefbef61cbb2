// The account budget and priorities as files write them: hostile values are clear errors, never a silent default.

import { clientEntrySchema } from '../../../src/callers/registry-schema';
import { accountBudgetSchema, prioritySchema } from '../../../src/config/budget-schema';

const problem = (input: unknown) => {
  const parsed = accountBudgetSchema.safeParse(input);
  return parsed.success
    ? undefined
    : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
};

describe('account budget schema', () => {
  test.each([
    [{ requestsPerSecond: 0 }, 'requestsPerSecond: must be above 0'],
    [{ requestsPerSecond: -5 }, 'requestsPerSecond: must be above 0'],
    [{ requestsPerSecond: 1e12 }, 'requestsPerSecond: must be at most 1000000'],
    [{ requestsPerSecond: 0.001 }, 'requestsPerSecond: must be at least 0.01'],
    [{ requestsPerSecond: '10' }, 'requestsPerSecond: must be a number'],
    [{ requestsPerSecond: 10, burst: 2.5 }, 'burst: must be a whole number of calls'],
    [{ requestsPerSecond: 10, burst: 0 }, 'burst: must be at least 1'],
    [
      { requestsPerSecond: 10, shares: { sheddable: 0.9, standard: 0.5 } },
      'shares: must keep sheddable <= standard <= critical',
    ],
    [{ requestsPerSecond: 10, shares: { critical: 1.5 } }, 'shares.critical: must be at most 1'],
    [{ requestsPerSecond: 10, shares: { sheddable: 0 } }, 'shares.sheddable: must be above 0'],
    [{ requestsPerSecond: 10, rps: 3 }, 'Unrecognized key'],
  ])('%j is refused: %s', (input, message) => {
    expect(problem(input)).toContain(message);
  });

  test('a fractional budget is meaningful (30 calls a minute), with a burst of at least one call', () => {
    expect(accountBudgetSchema.parse({ requestsPerSecond: 0.5 })).toEqual({
      requestsPerSecond: 0.5,
      burst: 1,
      shares: { sheddable: 0.5, standard: 0.8, critical: 1 },
    });
  });

  test('the default burst is a twentieth of a second of budget (the 5 % of the per-second bound)', () => {
    expect(accountBudgetSchema.parse({ requestsPerSecond: 200 }).burst).toBe(10);
  });
});

describe('registry priority', () => {
  test('an unknown priority names the allowed ones', () => {
    expect(prioritySchema.safeParse('urgent').error?.issues[0].message).toBe(
      'must be one of sheddable, standard, critical',
    );
  });

  test('a registry entry may set a priority; none means standard at the budget', () => {
    const entry = { id: 'batch', keys: [`sha256:${'a'.repeat(64)}`], scopes: ['plans:read'] };
    expect(clientEntrySchema.parse({ ...entry, priority: 'sheddable' }).priority).toBe('sheddable');
    expect(clientEntrySchema.parse(entry).priority).toBeUndefined();
    expect(clientEntrySchema.safeParse({ ...entry, priority: 'urgent' }).success).toBe(false);
  });
});
