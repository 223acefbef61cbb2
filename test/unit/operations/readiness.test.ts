import type { BudgetSnapshot } from '../../../src/budget';
import type { RegistryHealth } from '../../../src/callers/client-registry';
import { createReadiness } from '../../../src/operations/readiness';
import { judgeDurability as judge } from '../../../src/store/redis-durability';
import type { TokenStatus } from '../../../src/tokens/internal/token-provider';

function readinessWith(status: TokenStatus, circuit = 'closed') {
  let calls = 0;
  const account = {
    id: 'default',
    tokens: {
      status: () => status,
      getAccessToken: async () => {
        calls++;
        throw new Error('still failing');
      },
    },
    circuitStates: () => ({ validation: 'closed', plan: circuit }),
  };
  const readiness = createReadiness({
    accounts: { all: () => [account] },
    storeKind: 'redis',
    storeHealthy: () => status.storeHealthy,
  });
  return { readiness, tokenCalls: () => calls };
}

describe('readiness', () => {
  it('is ready with a valid token, a healthy store and a closed circuit', () => {
    const { readiness } = readinessWith({ hasValidToken: true, storeHealthy: true });
    expect(readiness.report().status).toBe('ready');
  });

  it('is ready before the first token (one is fetched on the first call)', () => {
    const { readiness } = readinessWith({ hasValidToken: false, storeHealthy: true });
    expect(readiness.report().status).toBe('ready');
  });

  it('stays ready but degraded when Redis is down (serving from memory)', () => {
    const report = readinessWith({ hasValidToken: true, storeHealthy: false }).readiness.report();
    expect(report.status).toBe('degraded');
    expect(report.checks.store.state).toBe('degraded');
  });

  it.each(['UPSTREAM_AUTH_FAILED', 'UPSTREAM_IP_NOT_WHITELISTED'])(
    'is not ready when the provider refuses the gateway (%s), and retries in the background',
    (reason) => {
      const { readiness, tokenCalls } = readinessWith({
        hasValidToken: false,
        storeHealthy: true,
        lastFailure: reason,
      });
      expect(readiness.report().status).toBe('not-ready');
      expect(readiness.report().checks.upstreamToken.state).toBe('failing');
      expect(tokenCalls()).toBe(1);
    },
  );

  it.each(['UPSTREAM_UNAVAILABLE', 'UPSTREAM_TIMEOUT'])(
    'only degrades on a passing upstream outage (%s): the whole fleet must not leave the load balancer',
    (reason) => {
      const { readiness } = readinessWith({ hasValidToken: false, storeHealthy: true, lastFailure: reason });
      expect(readiness.report().status).toBe('degraded');
      expect(readiness.report().checks.upstreamToken.state).toBe('degraded');
    },
  );

  it('is degraded while one circuit is open, naming each circuit, and not ready while draining', () => {
    const { readiness } = readinessWith({ hasValidToken: true, storeHealthy: true }, 'open');
    expect(readiness.report().status).toBe('degraded');
    expect(readiness.report().checks.circuits).toEqual({
      validation: { state: 'closed' },
      plan: { state: 'open' },
    });
    readiness.startDraining();
    expect(readiness.report().status).toBe('not-ready');
    expect(readiness.report().checks.draining).toBe(true);
  });
});

describe('readiness: the client registry', () => {
  const healthy = { hasValidToken: true, storeHealthy: true };
  const withRegistry = (health: RegistryHealth) =>
    createReadiness({
      accounts: {
        all: () => [
          {
            id: 'default',
            tokens: { status: () => healthy },
            circuitStates: () => ({ validation: 'closed', plan: 'closed' }),
          },
        ],
      },
      storeKind: 'memory',
      clientRegistry: { health: () => health },
    });

  it('is ok while the registry matches CLIENTS_FILE', () => {
    const report = withRegistry({}).report();
    expect(report.status).toBe('ready');
    expect(report.checks.clientRegistry).toEqual({
      state: 'ok',
      detail: 'the client registry matches CLIENTS_FILE',
    });
  });

  it('degrades (still serving: not not-ready) and names since when the registry is stale', () => {
    const since = Date.UTC(2026, 10, 20, 18, 30);
    const report = withRegistry({ staleSince: since, lastFailure: 'invalid' }).report();
    expect(report.status).toBe('degraded');
    expect(report.checks.clientRegistry).toEqual({
      state: 'degraded',
      staleSince: '2026-11-20T18:30:00.000Z',
      detail: expect.stringContaining('since 2026-11-20T18:30:00.000Z (invalid)'),
    });
    expect(report.checks.clientRegistry?.detail).toMatch(/keys removed from the file still work/);
  });

  it("names whether the ledger's Redis keeps the ledger, as detail only: the status does not change", () => {
    const account = {
      id: 'default',
      tokens: { status: () => ({ hasValidToken: true, storeHealthy: true }) },
      circuitStates: () => ({}),
    };
    const report = (durability: Parameters<typeof judge>[0] | undefined) =>
      createReadiness({
        accounts: { all: () => [account] },
        storeKind: 'redis',
        storeHealthy: () => true,
        ledgerDurability: () => (durability ? judge(durability) : undefined),
      }).report();
    const durable = {
      appendonly: 'yes',
      appendfsync: 'everysec',
      save: '',
      maxmemoryPolicy: 'noeviction',
      maxmemory: 0,
    };
    expect(report(durable)).toMatchObject({ status: 'ready', checks: { ledgerStore: { state: 'ok' } } });
    const volatile = report({ ...durable, appendonly: 'no' });
    expect(volatile.status).toBe('ready');
    expect(volatile.checks.ledgerStore).toMatchObject({
      state: 'degraded',
      detail: expect.stringContaining('persistence is off'),
      fix: expect.stringContaining('appendonly yes'),
    });
    expect(report(undefined).checks.ledgerStore?.state).toBe('unknown');
  });
});

describe('the provider budget in the readiness report', () => {
  const account = (snapshot: BudgetSnapshot) => ({
    id: 'default',
    tokens: { status: () => ({ hasValidToken: true, storeHealthy: true }) },
    circuitStates: () => ({ plan: 'closed' }),
    budgetState: () => snapshot,
  });
  const report = (snapshot: BudgetSnapshot) =>
    createReadiness({
      accounts: { all: () => [account(snapshot)] },
      storeKind: 'redis',
      storeHealthy: () => true,
    }).report();

  it("per account: rates, this replica's allocation and its share of the fleet, no Infinity nor undefined", () => {
    const ready = report({
      account: 'default',
      store: 'redis',
      configuredRate: 40,
      effectiveRate: 34,
      learnedRate: 34,
      probing: false,
      degraded: false,
      replicas: 3,
      allocation: { critical: 8.1234, standard: 3, sheddable: 0.4 },
    });
    expect(ready.status).toBe('ready');
    expect(ready.checks.accounts.default?.budget).toEqual({
      configuredRate: 40,
      effectiveRate: 34,
      learnedRate: 34,
      pausedUntil: null,
      probing: false,
      degraded: false,
      replicas: 3,
      allocation: { critical: 8.123, standard: 3, sheddable: 0.4 },
      fleetShare: 0.339,
    });
  });

  it("a paused account stays ready (every replica is paused alike): the pause's end as an ISO time", () => {
    const ready = report({
      account: 'default',
      store: 'redis',
      pausedUntil: Date.parse('2026-11-26T20:00:00Z'),
      probing: true,
      degraded: false,
      replicas: 1,
    });
    expect(ready.status).toBe('ready');
    expect(ready.checks.accounts.default?.budget).toMatchObject({
      configuredRate: null,
      effectiveRate: null,
      pausedUntil: '2026-11-26T20:00:00.000Z',
      probing: true,
      allocation: null,
      fleetShare: null,
    });
    expect(JSON.stringify(ready)).not.toMatch(/Infinity|undefined/);
  });
});
