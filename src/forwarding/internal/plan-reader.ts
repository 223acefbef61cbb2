// Plan reads: identical reads in flight share one upstream call (coalescing); an optional short cache on top.
import type { Request, Response } from 'express';
import { planAnswerKey } from '../../keys/redis-keys';
import type { AnswerCache } from './answer-cache';
import type { Forwarder, UpstreamAnswer } from './forwarder';
import { CallerLeftQueueError } from './upstream-slots';

export interface PlanReader {
  read(req: Request, res: Response, internalId: string): Promise<UpstreamAnswer>;
}

export interface PlanReaderDeps {
  readonly forwarder: Forwarder;
  /** With a positive TTL, complete 200 answers (with a body) are kept this many seconds. */
  readonly cache?: { readonly store: AnswerCache; readonly ttlSeconds: number };
}

/**
 * Only an answer with a body is handed to another caller (coalescing) or kept (cache): an empty body is never a
 * plan, whatever produced it. The forwarder only returns complete upstream GET answers.
 */
function isShareable(answer: UpstreamAnswer): boolean {
  return answer.body.length > 0;
}

function isCacheable(answer: UpstreamAnswer): boolean {
  return answer.status === 200 && isShareable(answer);
}

export function createPlanReader({ forwarder, cache }: PlanReaderDeps): PlanReader {
  // A dictionary object, not a Map: a Map filled and emptied on every request keeps its old tables chained to the
  // new ones, and a promoted table then keeps each later request alive through young-generation collections (see
  // RUNNING_ATTEMPT in forwarder.ts). Keys are lower-case UUIDs checked by the route, never `__proto__`.
  const inFlight: Record<string, Promise<UpstreamAnswer>> = Object.create(null);

  async function fetchPlan(req: Request, res: Response, id: string): Promise<UpstreamAnswer> {
    const cached = cache && (await cache.store.get(planAnswerKey(id)));
    if (cached && isCacheable(cached)) {
      res.locals.cache = 'hit';
      return cached;
    }
    return upstreamRead(req, res, id);
  }

  async function upstreamRead(req: Request, res: Response, id: string): Promise<UpstreamAnswer> {
    const answer = await forwarder.forward(req, res, {
      route: 'plan',
      method: 'GET',
      path: `/api/subscriptions/plan/${id}`,
    });
    if (cache && isCacheable(answer)) void cache.store.set(planAnswerKey(id), answer, cache.ttlSeconds);
    return answer;
  }

  /** A follower takes the leader's answer only when it has a body; otherwise it reads on its own (rare). */
  async function follow(pending: Promise<UpstreamAnswer>, req: Request, res: Response, id: string) {
    let answer: UpstreamAnswer;
    try {
      answer = await pending;
    } catch (error) {
      // The leader's caller hung up while in line for an upstream socket: read again (one follower leads now).
      if (error instanceof CallerLeftQueueError && !res.destroyed) return reader.read(req, res, id);
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
      const pending = inFlight[id];
      if (pending) {
        res.locals.coalesced = true;
        return follow(pending, req, res, id);
      }
      const leader = fetchPlan(req, res, id).finally(() => {
        delete inFlight[id];
      });
      inFlight[id] = leader;
      return leader;
    },
  };
  return reader;
}
