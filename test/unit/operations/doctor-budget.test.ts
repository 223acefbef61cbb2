// The doctor's budget line: the fleet's record read as the exchange script writes it, and the verdict (informative:
// a pause or a learned rate warns, nothing fails the report).
import { readFleetView } from '../../../src/budget';
import { accountBudgetSchema } from '../../../src/config/budget-schema';
import type { GatewayConfig } from '../../../src/config/gateway-config';
import { type ClientsCheck, formatReport, runDoctor } from '../../../src/operations/doctor';
import { type BudgetCheck, diagnoseBudget } from '../../../src/operations/doctor-budget';
import { accountSpec, fakeAccounts } from './doctor-fakes';

const NOW = 1_800_000_000_000;
const budgeted = (requestsPerSecond: number) => ({
  ...accountSpec('default'),
  budget: accountBudgetSchema.parse({ requestsPerSecond }),
});
/** A replica's field: lease end, demand, allocation (critical, standard, sheddable), accepted, holds. */
const replica = (leaseEnd: number, holds: [number, number, number]) =>
  [leaseEnd, 1, 1, 1, ...holds, 5, ...holds].join(' ');

describe('readFleetView (the record as the Lua script writes it)', () => {
  it('counts the live replicas and their holds; an expired lease, a record of another format and NaN are left out', () => {
    const view = readFleetView(
      {
        'r:a': replica(NOW + 2_000, [10, 5, 1]),
        'r:b': replica(NOW + 3_000, [4, 0, 0]),
        'r:gone': replica(NOW - 1, [30, 0, 0]),
        'r:old': `${NOW + 2_000} 1 1 1 2 2 2 5`,
        'r:junk': 'NaN x',
        '@learned': '0',
        '@pause': '0',
        '@probeUntil': '0',
      },
      NOW,
    );
    expect(view.found).toBe(true);
    expect(view.learnedRate).toBeUndefined();
    expect(view.pausedForMs).toBeUndefined();
    expect(view.replicas.map((r) => r.hold)).toEqual([16, 4, 6]);
    expect(view.replicas.map((r) => r.leaseForMs)).toEqual([2_000, 3_000, 2_000]);
  });

  it('reads a pause, its probe and a learned rate', () => {
    const view = readFleetView(
      { '@learned': '12.5', '@pause': String(NOW + 30_000), '@probeUntil': String(NOW + 4_000) },
      NOW,
    );
    expect(view).toMatchObject({ learnedRate: 12.5, pausedForMs: 30_000, probeForMs: 4_000, replicas: [] });
  });

  // Garbage in the record (a hand edit, another program): a pause ending centuries ahead. The exchange script holds
  // a pause read from the record to UPSTREAM_RETRY_AFTER_MAX_SECONDS from now (and writes it back so), so the fleet
  // is paused at most that long; the doctor said "PAUSED for 2500000 h more" and told the operator to lower the load.
  it('a pause in the record longer than UPSTREAM_RETRY_AFTER_MAX_SECONDS is read as the fleet holds it: capped', () => {
    const view = readFleetView({ '@pause': '9000000000000000' }, NOW, 120_000);
    expect(view.pausedForMs).toBe(120_000);
    const step = diagnoseBudget({ kind: 'fleet', view }, budgeted(40));
    expect(step.detail).toContain('PAUSED for 2 min more');
  });

  it('no record at all', () => {
    expect(readFleetView({}, NOW)).toEqual({ found: false, replicas: [] });
  });
});

describe('diagnoseBudget', () => {
  const fleet = (fields: Record<string, string>): BudgetCheck => ({
    kind: 'fleet',
    view: readFleetView(fields, NOW),
  });

  it('passes with the configured and effective rates and what the live replicas hold', () => {
    const step = diagnoseBudget(
      fleet({ 'r:a': replica(NOW + 2_000, [10, 5, 0]), 'r:b': replica(NOW + 2_000, [15, 0, 0]) }),
      budgeted(40),
    );
    expect(step).toEqual({
      title: 'provider budget (account default)',
      state: 'pass',
      detail: 'configured 40/s; effective 40/s; 2 live replicas holding 30/s (75 % of the effective rate)',
    });
  });

  it('warns, with the fix, while the provider has taught a lower rate (429s without Retry-After)', () => {
    const step = diagnoseBudget(
      fleet({ '@learned': '25.5', 'r:a': replica(NOW + 2_000, [20, 0, 0]) }),
      budgeted(40),
    );
    expect(step.state).toBe('warn');
    expect(step.detail).toContain("effective 25.5/s (learned from the provider's 429s: 25.5/s)");
    expect(step.fix).toContain('climbs back to the configured 40/s');
  });

  it('warns while the fleet is paused, naming how long and the probe', () => {
    const step = diagnoseBudget(
      fleet({ '@pause': String(NOW + 42_000), '@probeUntil': String(NOW + 5_000) }),
      budgeted(40),
    );
    expect(step.state).toBe('warn');
    expect(step.detail).toContain('PAUSED for 42 s more');
    expect(step.detail).toContain('a probe is out');
    expect(step.fix).toContain('503 UPSTREAM_RATE_LIMITED');
  });

  it('without Redis: passes, saying each replica keeps the budget itself', () => {
    const step = diagnoseBudget({ kind: 'unshared', reason: 'no shared store' }, accountSpec('default'));
    expect(step).toMatchObject({
      state: 'pass',
      detail: 'configured none configured (unbounded until the provider answers 429); no shared store',
    });
  });
});

describe('runDoctor with the budget line', () => {
  const config = {
    mode: 'upstream',
    production: true,
    redis: { topology: { kind: 'standalone', url: 'redis://r:6379' } },
    callers: { clientsFile: '/app/config/clients.json' },
  } as unknown as GatewayConfig;

  it("prints it after the account's login lines; a paused fleet warns and the report still passes", async () => {
    const fake = fakeAccounts({
      account: budgeted(40),
      attempt: { kind: 'answer', target: 'https://api.payments.example', status: 200, tokenIssued: true },
      budget: { kind: 'fleet', view: readFleetView({ '@pause': String(NOW + 42_000) }, NOW) },
    });
    const report = await runDoctor({
      loadConfig: () => config,
      checkClients: (): ClientsCheck => ({ kind: 'loaded', file: '/c.json', clients: 1 }),
      checkStore: async () => ({ kind: 'redis', where: 'Redis at r:6379', ok: true, latencyMs: 1 }),
      ...fake.deps,
    });
    expect(report.ok).toBe(true);
    const titles = report.steps.map((step) => step.title);
    expect(titles.slice(-2)).toEqual([
      'upstream token request (account default)',
      'provider budget (account default)',
    ]);
    expect(formatReport(report)).toContain(
      '! provider budget (account default): configured 40/s; effective 40/s',
    );
  });
});
