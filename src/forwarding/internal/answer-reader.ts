// GET reads of every catalogue operation: identical reads in flight share one upstream call (coalescing); the
// operation's cache (cache.ttlSeconds) on top. Answers are filtered (answer: strict) once, here, before they are
// cached or handed to coalesced callers.
import type { Request, Response } from 'express';
import { GatewayError } from '../../http/gateway-error';
import { answerKey } from '../../keys/redis-keys';
import type { AnswerCache } from './answer-cache';
import type { Forwarder, UpstreamAnswer, UpstreamExchange } from './forwarder';
import { type InFlightRead, InFlightReads } from './in-flight-reads';
import { CallerLeftQueueError } from './upstream-slots';

/** One GET of an operation: its exchange, plus how its answers are filtered and kept. */
export interface ReadExchange extends UpstreamExchange {
  readonly method: 'GET';
  /** With a positive TTL, complete 200 answers (with a body) are kept this many seconds. */
  readonly ttlSeconds: number;
  /** answer: strict — applied to each upstream answer before anyone sees, shares or keeps it. */
  readonly filter?: (answer: UpstreamAnswer) => UpstreamAnswer;
  /** The operation's answer version (the catalogue's): part of the cache key, so a changed schema starts afresh. */
  readonly answerVersion?: string;
}

/** The key of a read, in the cache and among reads in flight: its operation, its answer version, its upstream path. */
const keptAs = (exchange: ReadExchange) => answerKey(exchange.route, exchange.path, exchange.answerVersion);

export interface AnswerReader {
  read(req: Request, res: Response, exchange: ReadExchange): Promise<UpstreamAnswer>;
}

export interface AnswerReaderDeps {
  readonly forwarder: Forwarder;
  /** Where the operations with a TTL keep their answers (per account and merchant). */
  readonly cache?: AnswerCache;
  /**
   * Counts the changes of the account's credentials (a rotation to another merchant among them). Reads in flight are
   * shared only among callers who arrived under the same count, as the cache is kept per merchant: credentials
   * rotated while a read was out never hand that read's answer to a caller who came after. Absent: they never change.
   */
  readonly credentialsVersion?: () => number;
}

/**
 * Only an answer with a body is handed to another caller (coalescing) or kept (cache): an empty body is never a
 * resource, whatever produced it. The forwarder only returns complete upstream GET answers.
 */
function isShareable(answer: UpstreamAnswer): boolean {
  return answer.body.length > 0;
}

/** Refusals that belong to the leader's caller, not to the resource: never handed to another caller. */
const CALLERS_OWN_REFUSALS: ReadonlySet<string> = new Set(['QUOTA_EXCEEDED', 'UPSTREAM_BUDGET_EXHAUSTED']);

function isCallersOwnRefusal(error: unknown): boolean {
  return error instanceof GatewayError && CALLERS_OWN_REFUSALS.has(error.reason);
}

function isCacheable(answer: UpstreamAnswer): boolean {
  return answer.status === 200 && isShareable(answer);
}

/**
 * `reading`, its entry closed as it settles, before anyone awaiting it resumes: one reaction for either outcome
 * (`finally` would add a promise and a hop of its own to every read).
 */
function closedWhenSettled<A>(
  reads: InFlightReads<Promise<A>>,
  entry: InFlightRead<Promise<A>>,
  reading: Promise<A>,
): Promise<A> {
  return reading.then(
    (answer) => {
      reads.close(entry);
      return answer;
    },
    (error: unknown) => {
      reads.close(entry);
      throw error;
    },
  );
}

/**
 * The table of the reads in flight under the credentials as they are now: a new one when they change (the old one's
 * reads close in it as they settle, and it goes with them). Without a count of changes: one table.
 */
function inFlightTables<T>(credentialsVersion: (() => number) | undefined): () => InFlightReads<T> {
  let table = new InFlightReads<T>();
  if (!credentialsVersion) return () => table;
  let tableVersion = credentialsVersion();
  return () => {
    const version = credentialsVersion();
    if (version !== tableVersion) {
      tableVersion = version;
      table = new InFlightReads<T>();
    }
    return table;
  };
}

/**
 * A read nobody joins pays for the sharing only what it must: one entry in the in-flight table (in-flight-reads.ts)
 * and one reaction when the forward settles. Answers are buffered by the forwarder, so sharing costs nothing more.
 */
export function createAnswerReader({ forwarder, cache, credentialsVersion }: AnswerReaderDeps): AnswerReader {
  const inFlightNow = inFlightTables<Promise<UpstreamAnswer>>(credentialsVersion);

  /**
   * The upstream call, its answer filtered; kept in `store` when the operation caches and it is complete. Promise
   * chains, not async frames, where a read waits for the provider: a read in flight keeps each frame alive (issue 40).
   */
  const upstreamRead = (req: Request, res: Response, exchange: ReadExchange, store?: AnswerCache) => {
    const reading = forwarder.forward(req, res, exchange);
    if (!exchange.filter && !store) return reading;
    return reading.then((raw) => {
      const answer = exchange.filter ? exchange.filter(raw) : raw;
      if (store && isCacheable(answer)) void store.set(keptAs(exchange), answer, exchange.ttlSeconds);
      return answer;
    });
  };
  /** Each read uses the store pinned at its start (a merchant change meanwhile never gets its answer). */
  const pinned = (exchange: ReadExchange): AnswerCache | undefined =>
    cache && exchange.ttlSeconds > 0 ? (cache.pin?.() ?? cache) : undefined;

  const fetchAnswer = async (req: Request, res: Response, exchange: ReadExchange) => {
    const store = pinned(exchange);
    if (!store) return upstreamRead(req, res, exchange);
    const cached = await store.get(keptAs(exchange));
    if (cached && isCacheable(cached)) {
      res.locals.cache = 'hit';
      return cached;
    }
    return upstreamRead(req, res, exchange, store);
  };

  /** A follower takes the leader's answer only when it has a body; otherwise it reads on its own (rare). */
  async function follow(
    pending: Promise<UpstreamAnswer>,
    req: Request,
    res: Response,
    exchange: ReadExchange,
  ) {
    let answer: UpstreamAnswer;
    try {
      answer = await pending;
    } catch (error) {
      // The leader's caller hung up while in line for an upstream socket, or was refused for a reason of its own
      // (its quota, its priority's share of the budget): read again as oneself (one follower leads now).
      if ((error instanceof CallerLeftQueueError || isCallersOwnRefusal(error)) && !res.destroyed) {
        res.locals.coalesced = false;
        return reader.read(req, res, exchange);
      }
      throw error;
    }
    if (isShareable(answer)) return answer;
    res.locals.coalesced = false;
    return upstreamRead(req, res, exchange, pinned(exchange));
  }

  const reader: AnswerReader = {
    read(req, res, exchange) {
      // The cache's own key (operation, answer version, upstream path built from validated parameters): a read that
      // started under a schema since reloaded is not shared with those under the new one.
      const key = keptAs(exchange);
      const reads = inFlightNow();
      const pending = reads.get(key);
      if (pending) {
        res.locals.coalesced = true;
        return follow(pending, req, res, exchange);
      }
      // Reads for everyone who joins until the answer is in; the entry leaves before any follower resumes.
      const entry = reads.open(key);
      const leader = closedWhenSettled(reads, entry, fetchAnswer(req, res, exchange));
      entry.value = leader;
      return leader;
    },
  };
  return reader;
}
