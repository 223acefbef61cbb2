// The accounts this replica serves, by id: built from an AccountSpecSource, swapped whole when the source changes
// (unchanged accounts keep their unit, new and changed ones are built, replaced and removed ones drained and closed).
import { isDeepStrictEqual } from 'node:util';
import type { AccountSpec, AccountSpecSource } from '../config/account-spec';
import type { Account } from './account';

/** Why a reload was refused: the source could not be read or is invalid, or an account could not be built. */
export type AccountsReloadFailure = 'invalid' | 'unbuildable';

/** `staleSince`: epoch ms of the first refused reload since the set last matched its source. */
export type AccountsHealth =
  | { readonly staleSince?: undefined; readonly lastFailure?: undefined; readonly problem?: undefined }
  | { readonly staleSince: number; readonly lastFailure: AccountsReloadFailure; readonly problem: string };

export interface AccountSetMetrics {
  readonly accountsReloadFailures: { inc(labels: { reason: AccountsReloadFailure }): void };
  readonly accountsStaleSince: { set(value: number): void };
}

export interface AccountSet {
  /** The running account with this id: one Map lookup (the request path's only use of the set). */
  get(id: string): Account | undefined;
  /** Every running account, in the source's order. */
  all(): readonly Account[];
  /** The ids in use; a fresh set after each swap. */
  ids(): ReadonlySet<string>;
  /** The one account's id when exactly one is configured (callers need not name it), else undefined. */
  soleId(): string | undefined;
  /** Re-reads the source and swaps (SIGHUP, a watched file); false when the new set was refused. */
  reload(): Promise<boolean>;
  health(): AccountsHealth;
  /** Called after every swap with the new ids (the client registry checks its entries against them). */
  onSwap(listener: (ids: ReadonlySet<string>) => void): () => void;
  /** Stops watching, then closes every account (draining those being removed). */
  close(): Promise<void>;
}

export interface AccountSetOptions {
  readonly source: AccountSpecSource;
  readonly build: (spec: AccountSpec) => Promise<Account>;
  readonly logger: Record<
    'info' | 'warn' | 'error',
    (fields: Record<string, unknown>, message: string) => void
  >;
  readonly metrics?: AccountSetMetrics;
  /** Longest wait for a replaced or removed account's calls in flight before it is closed anyway. */
  readonly drainMs: number;
  /**
   * At shutdown, after the servers drained: the longest wait for an account's provider calls still running (their
   * callers may be cut by SHUTDOWN_TIMEOUT_MS) before it is closed anyway, so that each ends with its answer or its
   * own timeout and is counted as the provider counts it. Absent: none (closed at once).
   */
  readonly settleMs?: (account: Account) => number;
  /**
   * While a reload is refused, the source is read again this often (a credential file named by a new account often
   * lands after the accounts file that names it; nothing else would notice). Absent: only a change or SIGHUP does.
   */
  readonly retryMs?: number;
  /** Epoch ms; for tests. */
  readonly now?: () => number;
}

interface Snapshot {
  readonly byId: ReadonlyMap<string, Account>;
  readonly ordered: readonly Account[];
  readonly ids: ReadonlySet<string>;
  readonly sole?: string;
}

function snapshotOf(accounts: readonly Account[]): Snapshot {
  const byId = new Map(accounts.map((account) => [account.id, account]));
  return {
    byId,
    ordered: accounts,
    ids: new Set(byId.keys()),
    sole: accounts.length === 1 ? accounts[0]?.id : undefined,
  };
}

/** Builds every account of the source; throws (a ConfigError, a build failure) when it cannot start them all. */
export async function createAccountSet(options: AccountSetOptions): Promise<AccountSet> {
  const { source, logger } = options;
  const now = options.now ?? Date.now;
  const specs = await source.read();
  let snapshot = snapshotOf(await buildAll(specs, new Map(), options.build));
  const health = reloadHealth(options, now);
  const retire = retirement(options, now);
  let reloading: Promise<boolean> = Promise.resolve(true);
  const listeners = new Set<(ids: ReadonlySet<string>) => void>();

  const retrying = retryTimer(options.retryMs, () => void reload(true));

  /** `retry`: the timer's own attempt, which logs and counts a refusal only when its problem is a new one. */
  async function reloadNow(retry = false): Promise<boolean> {
    let next: readonly AccountSpec[];
    try {
      next = await source.read();
    } catch (error) {
      return retrying.after(health.refuse('invalid', (error as Error).message, retry));
    }
    const unchanged = unchangedAccounts(snapshot.byId, next);
    if (unchanged.size === snapshot.byId.size && unchanged.size === next.length) {
      // The same accounts, perhaps in another order (the first is listed first in /readyz).
      snapshot = snapshotOf(next.map((spec) => unchanged.get(spec.id) as Account));
      return health.current();
    }
    let accounts: Account[];
    try {
      accounts = await buildAll(next, unchanged, options.build);
    } catch (error) {
      return retrying.after(health.refuse('unbuildable', (error as Error).message, retry));
    }
    const previous = snapshot;
    snapshot = snapshotOf(accounts);
    const retired = previous.ordered.filter((account) => snapshot.byId.get(account.id) !== account);
    logger.info(
      {
        accounts: [...snapshot.ids],
        added: next.filter((spec) => !previous.byId.has(spec.id)).map((spec) => spec.id),
        changed: retired.filter((account) => snapshot.byId.has(account.id)).map((account) => account.id),
        removed: retired.filter((account) => !snapshot.byId.has(account.id)).map((account) => account.id),
      },
      'accounts reloaded',
    );
    for (const account of retired) retire.drain(account);
    for (const listener of listeners) listener(snapshot.ids);
    return health.current();
  }

  const reload = (retry = false) => {
    // One reload at a time: a burst of file events builds each account once.
    const run = () => reloadNow(retry);
    reloading = reloading.then(run, run);
    return reloading;
  };
  const stopWatching = source.watch(() => void reload());

  return {
    get: (id) => snapshot.byId.get(id),
    all: () => snapshot.ordered,
    ids: () => snapshot.ids,
    soleId: () => snapshot.sole,
    reload: () => reload(),
    health: () => health.state(),
    onSwap(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      retrying.stop();
      stopWatching();
      await reloading.catch(() => undefined);
      await retire.done();
      await Promise.all(snapshot.ordered.map((account) => closeSettled(account, options, now)));
    },
  };
}

/** One pending retry of a refused reload at a time, `everyMs` after the refusal; none once stopped or without it. */
function retryTimer(everyMs: number | undefined, retry: () => void) {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  return {
    /** Schedules the retry after a refusal; answers the refusal. */
    after(refused: false): false {
      if (everyMs === undefined || timer || stopped) return refused;
      timer = setTimeout(() => {
        timer = undefined;
        retry();
      }, everyMs);
      timer.unref();
      return refused;
    },
    stop(): void {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** Whether the set matches its source, and the loud refusal when it does not (the last good set keeps serving). */
function reloadHealth(options: AccountSetOptions, now: () => number) {
  const { logger, metrics } = options;
  let health: AccountsHealth = {};
  metrics?.accountsStaleSince.set(0);
  return {
    state: () => health,
    refuse(reason: AccountsReloadFailure, problem: string, quietIfKnown = false): false {
      if (quietIfKnown && health.lastFailure === reason && health.problem === problem) return false;
      const staleSince = health.staleSince ?? now();
      health = { staleSince, lastFailure: reason, problem };
      metrics?.accountsReloadFailures.inc({ reason });
      metrics?.accountsStaleSince.set(staleSince / 1000);
      logger.error(
        { reason, problem, staleSince: new Date(staleSince).toISOString() },
        'accounts reload refused; keeping the last good set of accounts',
      );
      return false;
    },
    current(): true {
      if (health.staleSince !== undefined) logger.info({}, 'accounts match their source again');
      health = {};
      metrics?.accountsStaleSince.set(0);
      return true;
    },
  };
}

/**
 * Shutdown: the account's provider calls end first (bounded by settleMs: their answer or their own timeout), then
 * it closes; a call still running then is cut with the account's sockets and ends at once. Either way its outcome is
 * recorded (the caller already gone: quotaGuarded's countIfCallerLeft, a setImmediate) before this resolves, so the
 * usage ledger's last write, which comes after, holds it.
 */
async function closeSettled(account: Account, options: AccountSetOptions, now: () => number): Promise<void> {
  const deadline = now() + (options.settleMs?.(account) ?? 0);
  while (account.inFlight() > 0 && now() < deadline) await sleep(50);
  await account.close();
  const cut = now() + CUT_CALLS_END_MS;
  while (account.inFlight() > 0 && now() < cut) await sleep(10);
  await new Promise((resolve) => setImmediate(resolve));
}

/** Calls cut with a closed account's sockets fail at once; this bounds the wait for their outcome to be recorded. */
const CUT_CALLS_END_MS = 1_000;

/** Replaced and removed accounts: each waits for its calls in flight (bounded by drainMs), then closes. */
function retirement(options: AccountSetOptions, now: () => number) {
  const draining = new Set<Promise<void>>();
  return {
    drain(account: Account): void {
      const done = (async () => {
        const deadline = now() + options.drainMs;
        while (account.inFlight() > 0 && now() < deadline) await sleep(50);
        try {
          await account.close();
        } catch (error) {
          options.logger.warn({ account: account.id, err: error }, 'a retired account did not close cleanly');
        }
      })();
      draining.add(done);
      void done.finally(() => draining.delete(done));
    },
    done: () => Promise.all([...draining]),
  };
}

/** The running accounts whose spec is exactly the new one: they keep running untouched. */
function unchangedAccounts(
  running: ReadonlyMap<string, Account>,
  next: readonly AccountSpec[],
): Map<string, Account> {
  const kept = new Map<string, Account>();
  for (const spec of next) {
    const account = running.get(spec.id);
    if (account && isDeepStrictEqual(account.spec, spec)) kept.set(spec.id, account);
  }
  return kept;
}

/** The accounts of `specs`: kept ones reused, the others built in parallel; on a failure the new ones are closed. */
async function buildAll(
  specs: readonly AccountSpec[],
  kept: ReadonlyMap<string, Account>,
  build: (spec: AccountSpec) => Promise<Account>,
): Promise<Account[]> {
  const results = await Promise.allSettled(
    specs.map((spec) => {
      const account = kept.get(spec.id);
      return account ? Promise.resolve(account) : build(spec);
    }),
  );
  const failure = results.find((result) => result.status === 'rejected');
  if (!failure) return results.map((result) => (result as PromiseFulfilledResult<Account>).value);
  await Promise.all(
    results.map((result) =>
      result.status === 'fulfilled' && !kept.has(result.value.id) ? result.value.close() : undefined,
    ),
  );
  const index = results.indexOf(failure);
  const reason = (failure as PromiseRejectedResult).reason as Error;
  throw new Error(
    `account "${specs[index]?.id}" could not be started: ${reason?.message ?? String(reason)}`,
    {
      cause: reason,
    },
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
