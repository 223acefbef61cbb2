// Fakes for provider-budget unit tests: replicas sharing one memory store on a fake clock, and a store that fails.

import type { BudgetStore } from '../../../src/budget/internal/budget-store';
import {
  type Admission,
  createProviderBudget,
  type ProviderBudget,
} from '../../../src/budget/internal/provider-budget';
import type { AccountBudget, Priority } from '../../../src/config/budget-schema';
import { accountBudgetSchema } from '../../../src/config/budget-schema';
import type { Clock } from '../../../src/tokens';

type ClockTimer = ReturnType<Clock['setTimeout']>;

import { captureLogger, testMetrics } from '../tokens/token-fakes';

interface Timer {
  unref?(): unknown;
  at: number;
  seq: number;
  run: () => void;
}

/** Lets promise chains run: the memory store and the budget use only microtasks. */
async function flush(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i += 1) await Promise.resolve();
}

/** A fake clock that settles on microtasks only: fast enough for thousands of waiting calls. */
export class FakeClock implements Clock {
  private timers = new Set<Timer>();
  private seq = 0;
  constructor(private current = 1_700_000_000_000) {}
  now = () => this.current;
  setTimeout = (run: () => void, ms: number): ClockTimer => {
    const timer: Timer = { at: this.current + Math.max(0, ms), seq: this.seq++, run, unref: () => undefined };
    this.timers.add(timer);
    return timer;
  };
  clearTimeout = (timer: ClockTimer): void => {
    this.timers.delete(timer as Timer);
  };
  async advance(ms: number): Promise<void> {
    const end = this.current + ms;
    await flush();
    for (;;) {
      let next: Timer | undefined;
      for (const t of this.timers)
        if (t.at <= end && (!next || t.at < next.at || (t.at === next.at && t.seq < next.seq))) next = t;
      if (!next) break;
      this.timers.delete(next);
      this.current = Math.max(this.current, next.at);
      next.run();
      await flush();
    }
    this.current = end;
    await flush();
  }
}

export function budgetOf(requestsPerSecond: number, extra: Partial<AccountBudget> = {}): AccountBudget {
  return accountBudgetSchema.parse({ requestsPerSecond, ...extra });
}

export interface Replica {
  readonly budget: ProviderBudget;
  readonly lines: () => string;
  readonly metrics: ReturnType<typeof testMetrics>;
}

export function replica(
  store: BudgetStore,
  clock: FakeClock,
  settings: AccountBudget | undefined,
  overrides: {
    waitMs?: number;
    replicaId?: string;
    health?: Parameters<typeof createProviderBudget>[0]['health'];
    newest?: () => boolean;
  } = {},
): Replica {
  const { logger, lines } = captureLogger();
  const metrics = testMetrics();
  const budget = createProviderBudget({
    accountId: 'acme',
    settings,
    waitMs: overrides.waitMs ?? 100,
    retryAfterMaxSeconds: 120,
    probeLeaseMs: 5_000,
    store,
    clock,
    logger,
    metrics: metrics.budget,
    replicaId: overrides.replicaId,
    health: overrides.health,
    newest: overrides.newest,
  });
  return { budget, lines, metrics };
}

/** A store that can be made to fail (Redis down) around a working one. */
export function failingStore(inner: BudgetStore): BudgetStore & { down: boolean } {
  const store = {
    kind: 'redis' as const,
    down: false,
    exchange: (request: Parameters<BudgetStore['exchange']>[0]) =>
      store.down ? Promise.reject(new Error('connection refused')) : inner.exchange(request),
    publish: (signal: Parameters<BudgetStore['publish']>[0]) =>
      store.down ? Promise.reject(new Error('connection refused')) : inner.publish(signal),
    subscribe: (listener: Parameters<BudgetStore['subscribe']>[0]) => inner.subscribe(listener),
    leave: (replicaId: string) =>
      store.down ? Promise.reject(new Error('connection refused')) : inner.leave(replicaId),
  };
  return store;
}

/** Grants per whole second of the fake clock, by priority, and the refusals. */
export class Tally {
  readonly perSecond = new Map<number, number>();
  readonly granted: Record<Priority, number> = { sheddable: 0, standard: 0, critical: 0 };
  readonly asked: Record<Priority, number> = { sheddable: 0, standard: 0, critical: 0 };
  readonly refusals: Admission[] = [];
  private readonly pending: Promise<void>[] = [];

  constructor(private readonly clock: FakeClock) {}

  /** Asks `budget` for a call of `priority`; `onGranted` plays the provider's answer. */
  ask(budget: ProviderBudget, priority: Priority, onGranted?: (second: number) => void): void {
    this.asked[priority] += 1;
    const record = (admission: Admission) => {
      if (!admission.granted) {
        this.refusals.push(admission);
        return;
      }
      const second = Math.floor(this.clock.now() / 1000);
      this.perSecond.set(second, (this.perSecond.get(second) ?? 0) + 1);
      this.granted[priority] += 1;
      onGranted?.(second);
    };
    const result = budget.admit(priority);
    if (result instanceof Promise) this.pending.push(result.then(record));
    else record(result);
  }

  /** Lets the calls still waiting (at most UPSTREAM_BUDGET_WAIT_MS) finish. */
  async done(): Promise<void> {
    await this.clock.advance(500);
    await Promise.all(this.pending);
    this.pending.length = 0;
  }

  /** Grants in each second from `from` (inclusive) to `to` (exclusive), relative to `origin` (ms). */
  seconds(origin: number, from: number, to: number): number[] {
    const first = Math.floor(origin / 1000);
    const out: number[] = [];
    for (let s = from; s < to; s += 1) out.push(this.perSecond.get(first + s) ?? 0);
    return out;
  }
}
