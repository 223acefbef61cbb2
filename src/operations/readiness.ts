// Readiness: can this replica serve now? A load balancer sends traffic only to a replica that says yes.
import type { BudgetSnapshot } from '../budget';
import type { ClientRegistry } from '../callers/client-registry';
import type { Durability } from '../store/redis-durability';
import type { TokenProvider } from '../tokens';

export type CheckState = 'ok' | 'degraded' | 'failing';

export interface AccountCheck {
  readonly state: CheckState;
  readonly detail: string;
  /** Each operation's upstream circuit of this account. */
  readonly circuits: Readonly<Record<string, { readonly state: string }>>;
  /** The account's provider budget as this replica applies it (informative: it never changes the state). */
  readonly budget?: BudgetCheck;
}

/**
 * Rates in calls per second; `null`: none (no budget configured, nothing learned: unbounded). A paused account is
 * not taken out of the load balancer: every replica is paused alike, and callers get the 503 with Retry-After.
 */
export interface BudgetCheck {
  readonly configuredRate: number | null;
  /** The rate the fleet keeps to now: min(configured, learned); null: unbounded. */
  readonly effectiveRate: number | null;
  /** Taught by the provider's 429s without Retry-After (AIMD); null: nothing learned. */
  readonly learnedRate: number | null;
  /** ISO time the fleet's pause ends (the provider's Retry-After); null when not paused. */
  readonly pausedUntil: string | null;
  /** This replica holds the fleet's one probe that ends the pause. */
  readonly probing: boolean;
  /** The shared store is unreachable: this replica keeps to budget / replicas last seen. */
  readonly degraded: boolean;
  /** Live replicas at the last exchange, this one included. */
  readonly replicas: number;
  /** This replica's rates by priority; null when unbounded. */
  readonly allocation: {
    readonly critical: number;
    readonly standard: number;
    readonly sheddable: number;
  } | null;
  /** This replica's part of the effective rate (0..1); null when unbounded. */
  readonly fleetShare: number | null;
}

export interface ReadinessReport {
  readonly status: 'ready' | 'degraded' | 'not-ready';
  readonly checks: {
    readonly draining: boolean;
    readonly store: { readonly state: CheckState; readonly kind: 'redis' | 'memory' };
    /** All accounts' tokens in one: `failing` only when no account can serve. */
    readonly upstreamToken: { readonly state: CheckState; readonly detail: string };
    /** Each operation's circuit; with several accounts keyed `account/operation`. */
    readonly circuits: Readonly<Record<string, { readonly state: string }>>;
    /** Each provider account (SPEC §10): its token and its circuits. */
    readonly accounts: Readonly<Record<string, AccountCheck>>;
    /**
     * Whether the Redis holding the usage ledger and the quota counters keeps them across a restart (detail only: it
     * never changes the status). Absent without Redis; `unknown` until read, or when CONFIG GET is refused.
     */
    readonly ledgerStore?: {
      readonly state: 'ok' | 'degraded' | 'unknown';
      readonly detail: string;
      readonly fix?: string;
    };
    readonly clientRegistry?: {
      readonly state: CheckState;
      readonly detail: string;
      /** ISO time of the first failed reload since the registry last matched CLIENTS_FILE. */
      readonly staleSince?: string;
    };
  };
}

export interface Readiness {
  report(): ReadinessReport;
  startDraining(): void;
  readonly draining: boolean;
}

/** What readiness reads of one account: its token manager and its circuits. */
export interface ReadinessAccount {
  readonly id: string;
  /** `getAccessToken`, when given, lets a failing account retry on its own (see below). */
  readonly tokens: Pick<TokenProvider, 'status'> & Partial<Pick<TokenProvider, 'getAccessToken'>>;
  circuitStates(): Readonly<Record<string, string>>;
  /** The account's provider budget (absent: no budget line). */
  budgetState?(): BudgetSnapshot;
}

export interface ReadinessDeps {
  /** The accounts running now (the set may change between two probes). */
  readonly accounts: { all(): readonly ReadinessAccount[] };
  readonly storeKind: 'redis' | 'memory';
  /** Live store health: the token manager learns of a recovered Redis only on its next store call. */
  readonly storeHealthy?: () => boolean;
  readonly clientRegistry?: Pick<ClientRegistry, 'health'>;
  /** The last durability read of the ledger's Redis (src/store/redis-durability.ts); absent without Redis. */
  readonly ledgerDurability?: () => Durability | undefined;
}

/** Token failures that mean the provider refuses this gateway, not that it is briefly unreachable. */
const GATEWAY_REFUSALS = new Set(['UPSTREAM_AUTH_FAILED', 'UPSTREAM_IP_NOT_WHITELISTED']);

export function createReadiness(deps: ReadinessDeps): Readiness {
  let draining = false;
  const retrying = new WeakSet<object>();

  /**
   * An account that is not ready gets no traffic on a replica taken out, so nothing would ever ask for its token
   * again: the probe itself starts one token request at a time per account. The token manager's fleet-wide login
   * back-off (after a 401/403) bounds how often that reaches the upstream. A healthy account is never made to log in
   * by a probe.
   */
  const retryInBackground = (account: ReadinessAccount) => {
    const tokens = account.tokens;
    const get = tokens.getAccessToken;
    if (retrying.has(tokens) || draining || !get) return;
    retrying.add(tokens);
    const done = () => retrying.delete(tokens);
    get.call(tokens).then(done, done);
  };

  return {
    get draining() {
      return draining;
    },
    startDraining() {
      draining = true;
    },
    report() {
      const all = deps.accounts.all();
      const storeOk = deps.storeHealthy
        ? deps.storeHealthy()
        : all.every((account) => account.tokens.status().storeHealthy);
      const storeState: CheckState = deps.storeKind === 'memory' || storeOk ? 'ok' : 'degraded';
      const accounts: Record<string, AccountCheck> = {};
      const circuits: Record<string, { state: string }> = {};
      let circuitsClosed = true;
      for (const account of all) {
        const check = accountCheck(account);
        if (check.state !== 'ok') retryInBackground(account);
        accounts[account.id] = check;
        for (const [operation, { state }] of Object.entries(check.circuits)) {
          circuits[all.length === 1 ? operation : `${account.id}/${operation}`] = { state };
          if (state !== 'closed') circuitsClosed = false;
        }
      }
      const upstreamToken = tokenSummary(all, accounts);
      const registry = deps.clientRegistry && registryCheck(deps.clientRegistry);
      // Ready while at least one account can serve: a refused sandbox password never takes production out.
      const notReady = draining || upstreamToken.state === 'failing';
      const degraded =
        storeState !== 'ok' ||
        upstreamToken.state !== 'ok' ||
        !circuitsClosed ||
        registry?.state === 'degraded';
      return {
        status: notReady ? 'not-ready' : degraded ? 'degraded' : 'ready',
        checks: {
          draining,
          store: { state: storeState, kind: deps.storeKind },
          upstreamToken,
          circuits,
          accounts,
          ...(deps.ledgerDurability && { ledgerStore: ledgerStoreCheck(deps.ledgerDurability()) }),
          ...(registry && { clientRegistry: registry }),
        },
      };
    },
  };
}

/** One account: `failing` when the provider refuses its credentials or address, `degraded` on a passing failure. */
function accountCheck(account: ReadinessAccount): AccountCheck {
  const token = account.tokens.status();
  // Only a refusal of the gateway itself (credentials, IP) fails an account: a passing upstream outage would take
  // the whole fleet out at once and turn envelopes into load-balancer errors.
  const refused = token.lastFailure !== undefined && GATEWAY_REFUSALS.has(token.lastFailure);
  const state: CheckState = token.hasValidToken
    ? 'ok'
    : refused
      ? 'failing'
      : token.lastFailure
        ? 'degraded'
        : 'ok';
  const detail = token.hasValidToken
    ? 'a valid upstream token is held'
    : token.lastFailure
      ? `the last upstream token request failed (${token.lastFailure}); retrying in the background`
      : 'no token yet; one is fetched on the first call';
  const circuits: Record<string, { state: string }> = {};
  for (const [operation, circuit] of Object.entries(account.circuitStates()))
    circuits[operation] = { state: circuit };
  const budget = account.budgetState && budgetCheck(account.budgetState());
  return { state, detail, circuits, ...(budget && { budget }) };
}

/** The budget's snapshot as JSON can carry it (no Infinity, no undefined), rounded to what an operator reads. */
function budgetCheck(snapshot: BudgetSnapshot): BudgetCheck {
  const round = (n: number) => Math.round(n * 1000) / 1000;
  const orNull = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? null : round(n));
  const { allocation, effectiveRate } = snapshot;
  const mine = allocation && allocation.critical + allocation.standard + allocation.sheddable;
  return {
    configuredRate: orNull(snapshot.configuredRate),
    effectiveRate: orNull(effectiveRate),
    learnedRate: orNull(snapshot.learnedRate),
    pausedUntil: snapshot.pausedUntil === undefined ? null : new Date(snapshot.pausedUntil).toISOString(),
    probing: snapshot.probing,
    degraded: snapshot.degraded,
    replicas: snapshot.replicas,
    allocation: allocation
      ? {
          critical: round(allocation.critical),
          standard: round(allocation.standard),
          sheddable: round(allocation.sheddable),
        }
      : null,
    fleetShare:
      mine !== undefined && effectiveRate !== undefined && effectiveRate > 0
        ? round(mine / effectiveRate)
        : null,
  };
}

/** The accounts' tokens in one check: the one account's own, or which accounts are failing or degraded. */
function tokenSummary(
  all: readonly ReadinessAccount[],
  accounts: Readonly<Record<string, AccountCheck>>,
): { state: CheckState; detail: string } {
  const checks = Object.values(accounts);
  if (all.length === 1 && checks[0]) return { state: checks[0].state, detail: checks[0].detail };
  const named = (state: CheckState) => Object.keys(accounts).filter((id) => accounts[id]?.state === state);
  const failing = named('failing');
  const degraded = named('degraded');
  if (checks.length > 0 && failing.length === checks.length)
    return { state: 'failing', detail: `every provider account is refused (${failing.join(', ')})` };
  if (failing.length + degraded.length === 0)
    return { state: 'ok', detail: 'every provider account can serve' };
  const parts = [
    ...(failing.length > 0 ? [`refused: ${failing.join(', ')}`] : []),
    ...(degraded.length > 0 ? [`retrying: ${degraded.join(', ')}`] : []),
  ];
  return {
    state: 'degraded',
    detail: `some provider accounts cannot serve (${parts.join('; ')}); the others serve`,
  };
}

/**
 * A registry that failed to reload only degrades: the replica still authenticates with the last good registry, and
 * taking every replica out at once (they all read the same file) would stop all traffic over a typo.
 */
function registryCheck(
  registry: Pick<ClientRegistry, 'health'>,
): NonNullable<ReadinessReport['checks']['clientRegistry']> {
  const { staleSince, lastFailure } = registry.health();
  if (staleSince === undefined) return { state: 'ok', detail: 'the client registry matches CLIENTS_FILE' };
  const since = new Date(staleSince).toISOString();
  return {
    state: 'degraded',
    staleSince: since,
    detail:
      `CLIENTS_FILE could not be reloaded since ${since} (${lastFailure}); serving the last good ` +
      'registry, so keys removed from the file still work until it is fixed (see the error log)',
  };
}

/** The ledger's store as last read: `degraded` when it would lose the ledger or the quotas on a restart or to eviction. */
function ledgerStoreCheck(
  durability: Durability | undefined,
): NonNullable<ReadinessReport['checks']['ledgerStore']> {
  if (!durability) return { state: 'unknown', detail: 'not read yet (Redis has not answered CONFIG GET)' };
  if (durability.state === 'durable') return { state: 'ok', detail: durability.detail };
  const state = durability.state === 'unknown' ? 'unknown' : 'degraded';
  return { state, detail: durability.detail, fix: durability.fix };
}
