// Plan reads: identical reads in flight share one upstream call (coalescing); an optional short cache on top.
import type { Request, Response } from 'express';
import { GatewayError } from '../../http/gateway-error';
import { planAnswerKey } from '../../keys/redis-keys';
import type { AnswerCache } from './answer-cache';
import type { Forwarder, UpstreamAnswer, UpstreamExchange } from './forwarder';
import { type InFlightRead, InFlightReads } from './in-flight-reads';
import { CallerLeftQueueError } from './upstream-slots';

export interface PlanReader {
  read(req: Request, res: Response, internalId: string): Promise<UpstreamAnswer>;
}

export interface PlanReaderDeps {
  readonly forwarder: Forwarder;
  /** With a positive TTL, complete 200 answers (with a body) are kept this many seconds. */
  readonly cache?: { readonly store: AnswerCache; readonly ttlSeconds: number };
}

type Read = (req: Request, res: Response, id: string) => Promise<UpstreamAnswer>;

/**
 * Only an answer with a body is handed to another caller (coalescing) or kept (cache): an empty body is never a
 * plan, whatever produced it. The forwarder only returns complete upstream GET answers.
 */
function isShareable(answer: UpstreamAnswer): boolean {
  return answer.body.length > 0;
}

/** Refusals that belong to the leader's caller, not to the plan: never handed to another caller. */
const CALLERS_OWN_REFUSALS: ReadonlySet<string> = new Set(['QUOTA_EXCEEDED', 'UPSTREAM_BUDGET_EXHAUSTED']);

function isCallersOwnRefusal(error: unknown): boolean {
  return error instanceof GatewayError && CALLERS_OWN_REFUSALS.has(error.reason);
}

function isCacheable(answer: UpstreamAnswer): boolean {
  return answer.status === 200 && isShareable(answer);
}

const planExchange = (id: string): UpstreamExchange => ({
  route: 'plan',
  method: 'GET',
  path: `/api/subscriptions/plan/${id}`,
});

/**
 * A read nobody joins pays for the sharing only what it must: one entry in the in-flight table (see
 * in-flight-reads.ts) and one async frame around the forward, which it shares the answer through. Whether a cache
 * is consulted is decided here, once, not per read. The answer is buffered by the forwarder, as every forwarded
 * answer is (the POST's too), so sharing it costs nothing more (bench/README.md, "the plan read's own cost").
 */
export function createPlanReader({ forwarder, cache }: PlanReaderDeps): PlanReader {
  const inFlight = new InFlightReads<Promise<UpstreamAnswer>>();

  const plainRead: Read = (req, res, id) => forwarder.forward(req, res, planExchange(id));
  const { upstreamRead, fetchPlan } = cache
    ? cachedReads(forwarder, cache)
    : { upstreamRead: plainRead, fetchPlan: plainRead };

  /** Reads for everyone who joins until the answer is in; the entry leaves before any follower resumes. */
  async function lead(req: Request, res: Response, entry: InFlightRead<Promise<UpstreamAnswer>>) {
    try {
      return await fetchPlan(req, res, entry.key);
    } finally {
      inFlight.close(entry);
    }
  }

  /** A follower takes the leader's answer only when it has a body; otherwise it reads on its own (rare). */
  async function follow(pending: Promise<UpstreamAnswer>, req: Request, res: Response, id: string) {
    let answer: UpstreamAnswer;
    try {
      answer = await pending;
    } catch (error) {
      // The leader's caller hung up while in line for an upstream socket, or was refused for a reason of its own
      // (its quota, its priority's share of the budget): read again as oneself (one follower leads now).
      if ((error instanceof CallerLeftQueueError || isCallersOwnRefusal(error)) && !res.destroyed) {
        res.locals.coalesced = false;
        return reader.read(req, res, id);
      }
      throw error;
    }
    if (isShareable(answer)) return answer;
    res.locals.coalesced = false;
    return upstreamRead(req, res, id);
  }

  const reader: PlanReader = {
    read(req, res, internalId) {
      // UUIDs are case-insensitive: one key (and one upstream path) per plan.
      const id = internalId.toLowerCase();
      const pending = inFlight.get(id);
      if (pending) {
        res.locals.coalesced = true;
        return follow(pending, req, res, id);
      }
      const entry = inFlight.open(id);
      const leader = lead(req, res, entry);
      entry.value = leader;
      return leader;
    },
  };
  return reader;
}

/**
 * The reads of a reader with a cache: the leader looks the plan up first; an upstream call keeps a complete 200
 * answer. Each read uses the store pinned at its start (a merchant change meanwhile never gets its answer).
 */
function cachedReads(
  forwarder: Forwarder,
  cache: NonNullable<PlanReaderDeps['cache']>,
): { upstreamRead: Read; fetchPlan: Read } {
  const pinned = (): AnswerCache => cache.store.pin?.() ?? cache.store;
  const readInto = async (req: Request, res: Response, id: string, store: AnswerCache) => {
    const answer = await forwarder.forward(req, res, planExchange(id));
    if (isCacheable(answer)) void store.set(planAnswerKey(id), answer, cache.ttlSeconds);
    return answer;
  };
  return {
    upstreamRead: (req, res, id) => readInto(req, res, id, pinned()),
    fetchPlan: async (req, res, id) => {
      const store = pinned();
      const cached = await store.get(planAnswerKey(id));
      if (cached && isCacheable(cached)) {
        res.locals.cache = 'hit';
        return cached;
      }
      return readInto(req, res, id, store);
    },
  };
}
