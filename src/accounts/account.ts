// What an account is: everything one provider account owns (credentials, token lifecycle, socket pool, circuits,
// forwarder, plan reads and cache), built from its AccountSpec over the parts the fleet shares, and closed as one.
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import {
  type BudgetSnapshot,
  createMemoryBudgetStore,
  createProviderBudget,
  createRedisBudgetStore,
} from '../budget';
import type { AccountSpec } from '../config/account-spec';
import { billablePredicate } from '../config/billable-statuses';
import type { GatewayConfig } from '../config/gateway-config';
import {
  type AnswerCache,
  type AnswerReader,
  busySockets,
  type CircuitStateName,
  createAnswerReader,
  createForwarder,
  createMemoryAnswerCache,
  createRedisAnswerCache,
  createUpstreamAgent,
  createUpstreamCircuits,
  createUpstreamPool,
  createUpstreamSlots,
  type Forwarder,
  poolSocketsInUse,
  type StreamForwarder,
} from '../forwarding';
import { GatewayError } from '../http/gateway-error';
import { budgetKeys, planCachePrefix } from '../keys/redis-keys';
import { type Metrics, registerAccessTokenTimeLeft } from '../observability/metrics';
import type { Tracing } from '../observability/tracing';
import type { RedisClient } from '../store/redis-connection';
import {
  type CredentialSource,
  createCredentialSource,
  createTokenClient,
  createTokenManager,
  type RecordSeal,
  systemClock,
  type TokenProvider,
  type TokenStore,
} from '../tokens';
import type { QuotaDecision, QuotaGate } from '../usage';
import { accountMetrics } from './account-metrics';

const CIRCUIT_STATE_VALUE = { closed: 0, 'half-open': 1, open: 2 } as const;

/** What every account uses and none owns: built once by the assembly, handed to each account. */
export interface AccountShared {
  readonly config: GatewayConfig;
  /** The shared store of token pairs, locks and notifications (Redis, or memory without it). */
  readonly store: TokenStore;
  /** Told of failed and recovered store calls (the Redis-health owner). */
  readonly storeHealth: {
    healthy(): boolean;
    reportFailure(error?: unknown, noticedBy?: string): void;
    reportSuccess(): void;
  };
  /** The quotas per client and account (SPEC §11): a unit is reserved before each provider call. */
  readonly quotas?: Pick<QuotaGate, 'reserve'>;
  /** The Redis client of the plan cache; absent without Redis. */
  readonly redis?: RedisClient;
  readonly seal: RecordSeal;
  /** deriveKey(TOKEN_ENCRYPTION_KEY, 'credential-fingerprint'). */
  readonly fingerprintKey?: Buffer;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly tracing: Tracing;
  /** The operationIds of the catalogue in force (SPEC §12): each has its circuit from the start. */
  readonly operations: () => readonly string[];
}

/** One running provider account. The request path uses `forwarder` and `reads`, nothing else of it. */
export interface Account {
  readonly id: string;
  readonly spec: AccountSpec;
  readonly tokens: TokenProvider;
  readonly credentials: CredentialSource;
  readonly forwarder: Forwarder & StreamForwarder;
  readonly reads: AnswerReader;
  circuitStates(): Readonly<Record<string, CircuitStateName>>;
  /** The account's provider budget in this replica, as /readyz shows it (no secret in it). */
  budgetState(): BudgetSnapshot;
  /** Requests holding the unit and forwarded calls running now: a retired unit closes once they are done (or the
   * drain ends). */
  inFlight(): number;
  /**
   * Holds the unit open for one request, from the moment it chose the account until its answer is sent (its body
   * may still be arriving when a reload retires the unit); returns the release, which is safe to call twice.
   */
  hold(): () => void;
  close(): Promise<void>;
}

/** Builds and starts one account; on failure closes what it had built and throws. */
export async function buildAccount(spec: AccountSpec, shared: AccountShared): Promise<Account> {
  const closers: (() => unknown)[] = [];
  const close = async () => {
    for (const closer of closers.splice(0).reverse()) await closer();
  };
  try {
    return await assemble(spec, shared, closers, close);
  } catch (error) {
    await close();
    throw error;
  }
}

async function assemble(
  spec: AccountSpec,
  shared: AccountShared,
  closers: (() => unknown)[],
  close: () => Promise<void>,
): Promise<Account> {
  const { config } = shared;
  const logger = shared.logger.child({ account: spec.id });
  const view = accountMetrics(shared.metrics, spec.id);
  const metrics = view.metrics;
  closers.push(() => view.close());
  const credentials = await createCredentialSource(spec.credentials, {
    logger,
    fingerprintKey: shared.fingerprintKey,
  });
  closers.push(() => credentials.close());
  const tokens = await startTokens(spec, shared, { credentials, logger, metrics }, closers);

  const operations = shared.operations();
  const circuits = createUpstreamCircuits(operations, {
    ...config.upstream.circuit,
    onStateChange: (operation, state) => {
      // A replaced unit still draining its calls never overwrites what its successor exports.
      if (view.isNewest()) metrics.circuitState.set({ operation }, CIRCUIT_STATE_VALUE[state]);
      logger.warn({ operation, circuit: state }, 'upstream circuit state changed');
    },
  });
  for (const operation of operations) metrics.circuitState.set({ operation }, 0);
  closers.push(() => {
    // A changed account's new unit (same id) already exports these series: only the newest unit removes them.
    if (!view.isNewest()) return;
    for (const operation of Object.keys(circuits.states()))
      shared.metrics.circuitState.remove({ operation, account: spec.id });
  });
  const { pool, streamAgent, slots } = startConnections(spec, config, metrics, closers);
  const budget = startBudget(spec, shared, logger, closers, view.isNewest);
  const inner = createForwarder({
    baseUrl: spec.baseUrl,
    pool,
    streamAgent,
    slots,
    tokens,
    circuits,
    timeoutMs: spec.timeoutMs,
    staticHeaders: spec.staticHeaders,
    metrics,
    logger,
    tracing: shared.tracing,
    budget,
    retryAfterMaxSeconds: shared.config.upstream.budget.retryAfterMaxSeconds,
  });
  const { forwarder, inFlight, hold } = quotaGuarded(inner, spec, shared.quotas);
  const reads = createAnswerReader({
    forwarder,
    cache: answerCache(spec, shared, credentials),
    credentialsVersion: credentials.changes,
  });
  return {
    id: spec.id,
    spec,
    tokens,
    credentials,
    forwarder,
    reads,
    circuitStates: () => circuits.states(),
    budgetState: () => budget.snapshot(),
    inFlight,
    hold,
    close,
  };
}

/**
 * The account's connections to its provider: the undici pool for the answers the gateway reads, and the http(s)
 * Agent http-proxy-middleware pipes `answer: "stream"` answers over. Same CA, egress address and limit, and the same
 * upstream slots in front of both (the bounded wait for a connection), so together they stay within maxSockets; an
 * idle Agent holds nothing. Watched by the metrics.
 */
function startConnections(
  spec: AccountSpec,
  config: GatewayConfig,
  metrics: Metrics,
  closers: (() => unknown)[],
) {
  const pool = createUpstreamPool(spec.baseUrl, {
    connections: spec.maxSockets,
    extraCa: spec.extraCa,
    localAddress: spec.localAddress,
    connectTimeoutMs: spec.timeoutMs,
  });
  // Calls still running when the unit closes (drained by then) end; idle sockets close at once.
  closers.push(() => pool.destroy());
  const streamAgent = createUpstreamAgent(spec.baseUrl, spec.maxSockets, {
    extraCa: spec.extraCa,
    localAddress: spec.localAddress,
  });
  closers.push(() => streamAgent.destroy());
  const slots = createUpstreamSlots({
    limit: spec.maxSockets,
    queueTimeoutMs: config.upstream.queueTimeoutMs,
  });
  metrics.watchUpstreamPool(spec.id, {
    socketsInUse: () => poolSocketsInUse(pool) + busySockets(streamAgent),
    waiting: () => slots.waiting,
  });
  return { pool, streamAgent, slots };
}

/** The account's token client and fleet token manager (its own keys, lock, single flight, back-off), started. */
async function startTokens(
  spec: AccountSpec,
  shared: AccountShared,
  own: { credentials: CredentialSource; logger: Logger; metrics: Metrics },
  closers: (() => unknown)[],
): Promise<TokenProvider> {
  const { config } = shared;
  const client = createTokenClient({
    baseUrl: spec.baseUrl,
    timeoutMs: spec.timeoutMs,
    headers: spec.staticHeaders,
    extraCa: spec.extraCa,
    localAddress: spec.localAddress,
  });
  closers.push(() => client.close?.());
  const tokens = createTokenManager({
    store: shared.store,
    client,
    credentials: own.credentials,
    logger: own.logger,
    metrics: own.metrics,
    tracing: shared.tracing,
    seal: shared.seal,
    storeHealth: shared.storeHealth,
    settings: {
      // The token keys are namespaced by base URL and username (src/keys/redis-keys.ts), as before accounts: the
      // `default` account of an existing deployment finds the pair it already holds.
      upstreamBaseUrl: spec.baseUrl,
      refreshSkewSeconds: config.tokens.refreshSkewSeconds,
      lockTtlMs: config.tokens.lockTtlMs,
      lockWaitMs: config.tokens.lockWaitMs,
      loginMinIntervalMs: config.tokens.loginMinIntervalMs,
      loginMaxIntervalMs: config.tokens.loginMaxIntervalMs,
      keyPrefix: config.redis.keyPrefix,
    },
  });
  // Stopped even when start fails half-way (its subscription is made first).
  closers.push(() => tokens.stop());
  await tokens.start();
  closers.push(
    registerAccessTokenTimeLeft(shared.metrics, () => tokens.status().accessExpiresAt, Date.now, spec.id),
  );
  return tokens;
}

/** The account's provider budget, shared by the fleet (SPEC §11), closed with the account. */
function startBudget(
  spec: AccountSpec,
  shared: AccountShared,
  logger: Logger,
  closers: (() => unknown)[],
  /** A changed account's old unit, still draining, leaves the account's gauges to its successor. */
  newest: () => boolean,
) {
  const { config } = shared;
  const budget = createProviderBudget({
    accountId: spec.id,
    settings: spec.budget,
    waitMs: config.upstream.budget.waitMs,
    retryAfterMaxSeconds: config.upstream.budget.retryAfterMaxSeconds,
    // The fleet's one probe after a pause may take the account's whole timeout before another replica probes.
    probeLeaseMs: spec.timeoutMs + 1_000,
    store: budgetStore(spec, shared),
    health: shared.redis ? shared.storeHealth : undefined,
    clock: systemClock,
    logger,
    metrics: shared.metrics.budget,
    newest,
  });
  closers.push(() => budget.close());
  return budget;
}

/**
 * The account's forwarder as the request path uses it: a quota unit reserved before each call (SPEC §11), committed
 * when the final provider answer is billable (the account's `billable` set), released otherwise; and the count of
 * calls running (a removed account waits for them, and for the requests holding the unit: Account.hold).
 */
export function quotaGuarded(
  inner: Forwarder & Partial<StreamForwarder>,
  spec: Pick<AccountSpec, 'id' | 'billable'>,
  quotas: Pick<QuotaGate, 'reserve'> | undefined,
): Pick<Account, 'forwarder' | 'inFlight' | 'hold'> {
  const accountId = spec.id;
  const isBillable = billablePredicate(spec.billable);
  let inFlight = 0;
  /**
   * One forwarder call under a reservation; `call` is given the decision of the final answer (once: when a piped
   * answer's head arrives, before the caller's answer can close and the ledger read `billable`; else at the end).
   * Promise chains, not an async frame: a call in flight keeps every frame it waits in alive (issue 40).
   */
  function guarded<T>(req: Request, res: Response, call: (decide: () => void) => Promise<T>): Promise<T> {
    inFlight++;
    let decide: (() => void) | undefined;
    const start = (decision: QuotaDecision | undefined) => {
      decide = decider(res, decision, isBillable);
      return call(decide);
    };
    const end = () => {
      try {
        decide?.();
      } finally {
        inFlight--;
        countIfCallerLeft(res);
      }
    };
    let running: Promise<T>;
    try {
      // One reservation per forwarder call (the 401 retry and the GET retry inside reuse it). The forwarder is only
      // called where a provider call would start: the plan reader's cache hits and coalesced followers never get here.
      const pending = quotas?.reserve(req.caller?.id ?? 'anonymous', accountId);
      running = pending instanceof Promise ? pending.then(start) : start(pending);
    } catch (error) {
      // As a rejection, never a throw: the ending's own failure (a commit that throws) replaces the error, as a
      // `finally` would.
      try {
        end();
      } catch (endError) {
        return Promise.reject(endError);
      }
      return Promise.reject(error);
    }
    // One reaction for either outcome (`finally` would add a promise and a hop of its own to every call).
    return running.then(
      (value) => {
        end();
        return value;
      },
      (error: unknown) => {
        end();
        throw error;
      },
    );
  }
  const forwarder: Forwarder & StreamForwarder = {
    forward: (req, res, exchange) => guarded(req, res, () => inner.forward(req, res, exchange)),
    stream(req, res, exchange) {
      const stream = inner.stream;
      if (!stream) return Promise.reject(new Error('this forwarder pipes no answers'));
      return guarded(req, res, (decide) => stream.call(inner, req, res, exchange, decide));
    },
  };
  const hold = () => {
    inFlight++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      inFlight--;
    };
  };
  return { forwarder, inFlight: () => inFlight, hold };
}

/**
 * Once the quota has decided: its refusal thrown, or the decision of the call's final answer, which commits or
 * releases the reservation (once, whoever asks first).
 */
function decider(
  res: Response,
  decision: QuotaDecision | undefined,
  isBillable: (status: number) => boolean,
): () => void {
  if (decision && !decision.allowed) {
    res.locals.quotaPeriod = decision.refusal.period;
    throw quotaExceeded(decision.refusal);
  }
  let decided = false;
  return () => {
    if (decided) return;
    decided = true;
    // The final provider answer decides, passed through or not (a 5xx or 403 is thrown as a gateway error).
    const { upstreamAnswered, upstreamStatus } = res.locals;
    const billable = upstreamAnswered === true && isBillable(upstreamStatus ?? 0);
    res.locals.billable = billable;
    if (billable) decision?.reservation.commit();
    else decision?.reservation.release();
  };
}

/**
 * The caller hung up before the ledger could count its request (usage/request-usage.ts): it is counted now that the
 * provider call ended, after the request's own handling of the outcome (a timeout's refusal) has run.
 */
function countIfCallerLeft(res: Response): void {
  const pending = res.locals.usagePending;
  if (pending === undefined) return;
  res.locals.usagePending = undefined;
  setImmediate(pending);
}

/** The account's budget shared by the fleet through Redis (its record and signal channel), else in this process. */
function budgetStore(spec: AccountSpec, shared: AccountShared) {
  if (!shared.redis) return createMemoryBudgetStore();
  const keys = budgetKeys(shared.config.redis.keyPrefix, spec.id);
  return createRedisBudgetStore({
    redis: shared.redis,
    key: keys.fleet,
    channel: keys.channel,
    channels: shared.store,
  });
}

function quotaExceeded(refusal: { period: string; limit: number; retryAfterSeconds: number }): GatewayError {
  return new GatewayError(
    'QUOTA_EXCEEDED',
    `This client's ${refusal.period} quota of ${refusal.limit} billable provider calls on this account is used up; it resets after the Retry-After seconds.`,
    { headers: { 'retry-after': String(refusal.retryAfterSeconds) } },
  );
}

/**
 * The answers of the operations with a cache (cache.ttlSeconds; PLAN_CACHE_TTL_SECONDS for `plan`): shared and sealed
 * in Redis, else in this process; per account and per merchant. The store follows the username the account logs in
 * with now: credential files rotated to another merchant (or an accounts file that points the id at another's) never
 * read the previous merchant's answers. Made on first use: an account whose operations cache nothing makes none.
 */
function answerCache(spec: AccountSpec, shared: AccountShared, credentials: CredentialSource): AnswerCache {
  const { redis, seal } = shared;
  const keyPrefix = shared.config.redis.keyPrefix;
  const store = merchantAnswerCache(credentials, (username) => {
    const prefix = planCachePrefix(keyPrefix, spec.baseUrl, spec.id, username);
    return redis ? createRedisAnswerCache(redis, prefix, seal) : createMemoryAnswerCache();
  });
  return store;
}

/**
 * An answer cache per merchant: the one of the username the account logs in with now. A read pins the store it looks
 * up, and keeps its answer there only if the credentials did not change while the call was out (their count of
 * changes; the username alone would miss a change and a change back): credentials rotated to another
 * merchant while the call was out (whichever token it then carried) never mix two merchants' plans.
 */
export function merchantAnswerCache(
  credentials: Pick<CredentialSource, 'current' | 'changes'>,
  storeOf: (username: string) => AnswerCache,
): AnswerCache {
  let current: { readonly username: string; readonly store: AnswerCache } | undefined;
  const storeNow = (): { readonly username: string; readonly store: AnswerCache } => {
    const { username } = credentials.current();
    if (current?.username !== username) current = { username, store: storeOf(username) };
    return current;
  };
  return {
    get: (key) => storeNow().store.get(key),
    set: (key, answer, seconds) => storeNow().store.set(key, answer, seconds),
    pin() {
      const pinned = storeNow();
      const pinnedChanges = credentials.changes();
      return {
        get: (key) => pinned.store.get(key),
        set: (key, answer, seconds) =>
          credentials.changes() === pinnedChanges
            ? pinned.store.set(key, answer, seconds)
            : Promise.resolve(),
      };
    },
  };
}
