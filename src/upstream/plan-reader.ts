// Plan reads: identical reads in flight share one upstream call (coalescing); an optional short cache on top.
import type { Request, Response } from 'express';
import type { AnswerCache } from '../store/answer-cache';
import type { Forwarder, UpstreamAnswer } from './forwarder';
import { CallerLeftQueueError } from './upstream-slots';

export interface PlanReader {
  read(req: Request, res: Response, internalId: string): Promise<UpstreamAnswer>;
}

export interface PlanReaderDeps {
  readonly forwarder: Forwarder;
  /** With a positive TTL, 200 answers are kept this many seconds. */
  readonly cache?: { readonly store: AnswerCache; readonly ttlSeconds: number };
}

export function createPlanReader({ forwarder, cache }: PlanReaderDeps): PlanReader {
  // A dictionary object, not a Map: a Map filled and emptied on every request keeps its old tables chained to the
  // new ones, and a promoted table then keeps each later request alive through young-generation collections (see
  // RUNNING_ATTEMPT in forwarder.ts). Keys are lower-case UUIDs checked by the route, never `__proto__`.
  const inFlight: Record<string, Promise<UpstreamAnswer>> = Object.create(null);

  async function fetchPlan(req: Request, res: Response, id: string): Promise<UpstreamAnswer> {
    const cached = cache && (await cache.store.get(`plan:${id}`));
    if (cached) {
      res.locals.cache = 'hit';
      return cached;
    }
    const answer = await forwarder.forward(req, res, {
      route: 'plan',
      method: 'GET',
      path: `/api/subscriptions/plan/${id}`,
    });
    if (cache && answer.status === 200) void cache.store.set(`plan:${id}`, answer, cache.ttlSeconds);
    return answer;
  }

  const reader: PlanReader = {
    read(req, res, internalId) {
      // UUIDs are case-insensitive: one key (and one upstream path) per plan.
      const id = internalId.toLowerCase();
      const pending = inFlight[id];
      if (pending) {
        res.locals.coalesced = true;
        // The leader's caller hung up while in line for an upstream socket: read again (one follower leads now).
        return pending.catch((error: unknown) => {
          if (error instanceof CallerLeftQueueError && !res.destroyed) return reader.read(req, res, id);
          throw error;
        });
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
