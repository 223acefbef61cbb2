// GET reader rules with a scripted forwarder: only answers with a body are shared with followers or cached; answers
// are filtered once, before anyone shares or keeps them.
import type { Request, Response } from 'express';
import { type AnswerCache, createMemoryAnswerCache } from '../../../src/forwarding/internal/answer-cache';
import { type AnswerReaderDeps, createAnswerReader } from '../../../src/forwarding/internal/answer-reader';
import type { Forwarder, UpstreamAnswer } from '../../../src/forwarding/internal/forwarder';
import { GatewayError } from '../../../src/http/gateway-error';

const ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const plan: UpstreamAnswer = {
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(`{"internalId":"${ID}"}`),
};
const empty: UpstreamAnswer = {
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: Buffer.alloc(0),
};

/** A forwarder that answers each call with the next scripted answer, when `release()` is called. */
function scriptedForwarder(answers: UpstreamAnswer[]) {
  const waiting: (() => void)[] = [];
  let calls = 0;
  const forwarder: Forwarder = {
    forward: (_req, _res, exchange) => {
      expect(exchange.method).toBe('GET');
      const answer = answers[calls++] ?? plan;
      return new Promise((resolve) => waiting.push(() => resolve(answer)));
    },
  };
  return {
    forwarder,
    calls: () => calls,
    releaseAll: () => {
      for (const release of waiting.splice(0)) release();
    },
  };
}

const request = () => ({}) as Request;
const response = () => ({ locals: {} }) as unknown as Response;
const tick = () => new Promise((resolve) => setImmediate(resolve));

async function settle<T>(promise: Promise<T>, upstream: { releaseAll(): void }): Promise<T> {
  for (let i = 0; i < 5; i++) {
    await tick();
    upstream.releaseAll();
  }
  return promise;
}

/** The reads of `plan` as its catalogue route makes them. */
function planReader(
  deps: AnswerReaderDeps,
  ttlSeconds = 0,
  filter?: (answer: UpstreamAnswer) => UpstreamAnswer,
) {
  const reader = createAnswerReader(deps);
  return {
    read: (req: Request, res: Response, id: string) =>
      reader.read(req, res, {
        route: 'plan',
        method: 'GET',
        path: `/api/subscriptions/plan/${id}`,
        ttlSeconds,
        filter,
      }),
  };
}

describe('answer reader', () => {
  it('filters an answer once, before coalesced callers share it and before the cache keeps it', async () => {
    const cache = createMemoryAnswerCache();
    const upstream = scriptedForwarder([plan]);
    const filtered: UpstreamAnswer = { ...plan, body: Buffer.from('{}') };
    const filter = jest.fn((_answer: UpstreamAnswer) => filtered);
    const reader = planReader({ forwarder: upstream.forwarder, cache }, 30, filter);
    const both = await settle(
      Promise.all([reader.read(request(), response(), ID), reader.read(request(), response(), ID)]),
      upstream,
    );
    expect(both).toEqual([filtered, filtered]);
    expect(filter).toHaveBeenCalledTimes(1);
    await tick();
    expect(await cache.get(`plan:/api/subscriptions/plan/${ID}`)).toEqual(filtered);
  });

  it('shares a leader answer with a body between concurrent reads: one upstream call', async () => {
    const upstream = scriptedForwarder([plan]);
    const reader = planReader({ forwarder: upstream.forwarder });
    const both = Promise.all([
      reader.read(request(), response(), ID),
      reader.read(request(), response(), ID),
    ]);
    const [a, b] = await settle(both, upstream);
    expect(a).toBe(plan);
    expect(b).toBe(plan);
    expect(upstream.calls()).toBe(1);
  });

  it('never hands an empty 200 to a follower: the follower reads on its own', async () => {
    const upstream = scriptedForwarder([empty, plan]);
    const reader = planReader({ forwarder: upstream.forwarder });
    const followerRes = response();
    const both = Promise.all([
      reader.read(request(), response(), ID),
      reader.read(request(), followerRes, ID),
    ]);
    const [leader, follower] = await settle(both, upstream);
    expect(leader.body.length).toBe(0);
    expect(follower.body.toString()).toBe(plan.body.toString());
    expect(followerRes.locals.coalesced).toBe(false);
    expect(upstream.calls()).toBe(2);
  });

  it('never caches an empty 200 or a non-200; caches a 200 with a body', async () => {
    const cache = createMemoryAnswerCache();
    const notFound: UpstreamAnswer = { ...plan, status: 404 };
    const upstream = scriptedForwarder([empty, notFound, plan]);
    const reader = planReader({ forwarder: upstream.forwarder, cache: cache }, 30);
    for (const expected of [empty, notFound, plan]) {
      expect(await settle(reader.read(request(), response(), ID), upstream)).toBe(expected);
    }
    expect(upstream.calls()).toBe(3);
    const res = response();
    expect(await settle(reader.read(request(), res, ID), upstream)).toEqual(plan);
    expect(res.locals.cache).toBe('hit');
    expect(upstream.calls()).toBe(3);
  });

  it('keeps an answer in the store its read looked up: a namespace switched while the call was out never gets it', async () => {
    // An account's cache follows the merchant it logs in as: credentials rotated mid-call switch the namespace.
    const merchants = { a: createMemoryAnswerCache(), b: createMemoryAnswerCache() };
    let current: keyof typeof merchants = 'a';
    const store: AnswerCache = {
      get: (key) => merchants[current].get(key),
      set: (key, answer, seconds) => merchants[current].set(key, answer, seconds),
      pin: () => merchants[current],
    };
    const upstream = scriptedForwarder([plan]);
    const reader = planReader({ forwarder: upstream.forwarder, cache: store }, 30);
    const reading = reader.read(request(), response(), ID);
    await tick();
    current = 'b';
    expect(await settle(reading, upstream)).toBe(plan);
    await tick();
    expect(await merchants.a.get(`plan:/api/subscriptions/plan/${ID}`)).toEqual(plan);
    expect(await merchants.b.get(`plan:/api/subscriptions/plan/${ID}`)).toBeUndefined();
  });

  it('shares a read in flight only among callers who came under the same credentials', async () => {
    const merchantA: UpstreamAnswer = { ...plan, body: Buffer.from('{"merchant":"a"}') };
    const merchantB: UpstreamAnswer = { ...plan, body: Buffer.from('{"merchant":"b"}') };
    let version = 0;
    const upstream = scriptedForwarder([merchantA, merchantB]);
    const reader = planReader({ forwarder: upstream.forwarder, credentialsVersion: () => version });
    const beforeRes = response();
    const before = reader.read(request(), beforeRes, ID);
    const alongsideRes = response();
    const alongside = reader.read(request(), alongsideRes, ID);
    await tick();
    version += 1; // the credentials rotated to another merchant while the first read was out
    const afterRes = response();
    const after = reader.read(request(), afterRes, ID);
    const afterAlongsideRes = response();
    const afterAlongside = reader.read(request(), afterAlongsideRes, ID);
    expect(await settle(before, upstream)).toBe(merchantA);
    expect(await alongside).toBe(merchantA);
    expect(await after).toBe(merchantB);
    expect(await afterAlongside).toBe(merchantB);
    expect(upstream.calls()).toBe(2);
    expect([beforeRes, alongsideRes, afterRes, afterAlongsideRes].map((r) => r.locals.coalesced)).toEqual([
      undefined,
      true,
      undefined,
      true,
    ]);
  });

  it('credentials changed and changed back while a read is out: callers after are not joined to it', async () => {
    let version = 0;
    const upstream = scriptedForwarder([plan, plan]);
    const reader = planReader({ forwarder: upstream.forwarder, credentialsVersion: () => version });
    const first = reader.read(request(), response(), ID);
    await tick();
    version += 2; // to merchant B and back to A, with no read in between
    const laterRes = response();
    const later = reader.read(request(), laterRes, ID);
    const joinedRes = response();
    const joined = reader.read(request(), joinedRes, ID);
    await settle(Promise.all([first, later, joined]), upstream);
    expect(upstream.calls()).toBe(2);
    expect([laterRes.locals.coalesced, joinedRes.locals.coalesced]).toEqual([undefined, true]);
  });

  it('ignores an empty cache entry left by an older version: reads upstream instead', async () => {
    const cache = createMemoryAnswerCache();
    await cache.set(`plan:/api/subscriptions/plan/${ID}`, empty, 30);
    const upstream = scriptedForwarder([plan]);
    const reader = planReader({ forwarder: upstream.forwarder, cache: cache }, 30);
    const res = response();
    expect(await settle(reader.read(request(), res, ID), upstream)).toBe(plan);
    expect(res.locals.cache).toBeUndefined();
    expect(upstream.calls()).toBe(1);
  });

  it('leaves no entry behind when the read fails at once: the next read calls the upstream again', async () => {
    let calls = 0;
    const forwarder: Forwarder = {
      forward: () => {
        calls += 1;
        if (calls === 1) throw new Error('failed before any await');
        return Promise.resolve(plan);
      },
    };
    const reader = planReader({ forwarder });
    await expect(reader.read(request(), response(), ID)).rejects.toThrow('failed before any await');
    expect(await reader.read(request(), response(), ID)).toBe(plan);
    expect(calls).toBe(2);
  });

  it("never hands the leader's own refusal (its quota) to a follower: the follower reads as itself", async () => {
    let calls = 0;
    let refuse: (error: unknown) => void = () => {};
    const forwarder: Forwarder = {
      forward: () => {
        calls += 1;
        if (calls === 1) return new Promise((_resolve, reject) => (refuse = reject));
        return Promise.resolve(plan);
      },
    };
    const reader = planReader({ forwarder });
    const leader = reader.read(request(), response(), ID);
    const res = response();
    const follower = reader.read(request(), res, ID);
    refuse(new GatewayError('QUOTA_EXCEEDED', "The client's quota is spent."));
    await expect(leader).rejects.toThrow("The client's quota is spent.");
    expect(await follower).toBe(plan);
    expect(res.locals.coalesced).toBe(false);
    expect(calls).toBe(2);
  });

  it('shares nothing once a read has settled: a later identical read calls the upstream again', async () => {
    const upstream = scriptedForwarder([plan, plan]);
    const reader = planReader({ forwarder: upstream.forwarder });
    await settle(reader.read(request(), response(), ID), upstream);
    const res = response();
    await settle(reader.read(request(), res, ID.toUpperCase()), upstream);
    expect(res.locals.coalesced).toBeUndefined();
    expect(upstream.calls()).toBe(2);
  });
});
