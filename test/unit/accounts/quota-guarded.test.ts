// The account's forwarder settles each quota unit on the final provider answer, by the account's billable set: a
// passed-through answer or one thrown as a gateway error (5xx, 403), never a 401 followed by a refusal.
import type { Request, Response } from 'express';
import { quotaGuarded } from '../../../src/accounts/account';
import type { Forwarder } from '../../../src/forwarding';

type UpstreamAnswer = Awaited<ReturnType<Forwarder['forward']>>;

import { GatewayError } from '../../../src/http/gateway-error';

type Outcome = { status: number; answered: boolean; answers?: number; thrown?: boolean };

function run(billable: readonly string[] | undefined, outcome: Outcome) {
  const settled: string[] = [];
  const quotas = {
    reserve: () => ({
      allowed: true as const,
      reservation: { commit: () => settled.push('commit'), release: () => settled.push('release') },
    }),
  };
  const inner: Forwarder = {
    async forward(_req, res) {
      res.locals.upstreamStatus = outcome.status;
      res.locals.upstreamAnswers = outcome.answers ?? 1;
      res.locals.upstreamAnswered = outcome.answered;
      if (outcome.thrown) throw new GatewayError('UPSTREAM_UNAVAILABLE', 'failed');
      return { status: outcome.status, headers: {}, body: Buffer.from('{}') } as unknown as UpstreamAnswer;
    },
  };
  const { forwarder } = quotaGuarded(inner, { id: 'acct', ...(billable && { billable }) }, quotas);
  const res = { locals: {} } as Response;
  const req = { caller: { id: 'client' } } as unknown as Request;
  return forwarder
    .forward(req, res, { route: 'plan', method: 'GET', path: '/x' })
    .catch(() => undefined)
    .then(() => ({ settled, billable: res.locals.billable }));
}

describe('quotaGuarded: billable by the account set', () => {
  test('default set: 200 and 404 commit; 401, 429 release; a thrown 503 releases', async () => {
    expect(await run(undefined, { status: 200, answered: true })).toEqual({
      settled: ['commit'],
      billable: true,
    });
    expect(await run(undefined, { status: 404, answered: true })).toEqual({
      settled: ['commit'],
      billable: true,
    });
    expect(await run(undefined, { status: 429, answered: true })).toEqual({
      settled: ['release'],
      billable: false,
    });
    expect(await run(undefined, { status: 503, answered: true, thrown: true })).toEqual({
      settled: ['release'],
      billable: false,
    });
  });

  test('["2xx"]: a 404 is not billable', async () => {
    expect(await run(['2xx'], { status: 404, answered: true })).toEqual({
      settled: ['release'],
      billable: false,
    });
    expect(await run(['2xx'], { status: 201, answered: true })).toEqual({
      settled: ['commit'],
      billable: true,
    });
  });

  test('["2xx", "5xx"]: a 503 thrown as a gateway error is billable (the final answer was the provider\'s)', async () => {
    expect(await run(['2xx', '5xx'], { status: 503, answered: true, thrown: true })).toEqual({
      settled: ['commit'],
      billable: true,
    });
  });

  test('a call that did not end on a provider answer is never billable, whatever the set', async () => {
    // A 401, then the retry refused by the budget or cut: the 401 is not the final answer.
    expect(await run(['2xx', '4xx'], { status: 401, answered: false, answers: 1, thrown: true })).toEqual({
      settled: ['release'],
      billable: false,
    });
    // The final answer of a retry that the provider answered 401 again is billable when the set says so.
    expect(await run(['2xx', '4xx'], { status: 401, answered: true, answers: 2, thrown: true })).toEqual({
      settled: ['commit'],
      billable: true,
    });
  });
});

describe('quotaGuarded: the calls in flight', () => {
  const req = { caller: { id: 'client' } } as unknown as Request;
  const answer = { status: 200, headers: {}, body: Buffer.from('{}') } as unknown as UpstreamAnswer;
  const answering: Forwarder = {
    async forward(_req, res) {
      res.locals.upstreamStatus = 200;
      res.locals.upstreamAnswered = true;
      return answer;
    },
  };

  test('counted while running, and no longer once settled: refused, thrown at once, or a reservation whose settling throws', async () => {
    let answer!: () => void;
    const held: Forwarder = {
      forward: () => new Promise<UpstreamAnswer>((resolve) => (answer = () => resolve({} as UpstreamAnswer))),
    };
    const running = quotaGuarded(held, { id: 'acct' }, undefined);
    const call = running.forwarder.forward(req, { locals: {} } as Response, {
      route: 'plan',
      method: 'GET',
      path: '/x',
    });
    expect(running.inFlight()).toBe(1);
    answer();
    await call;
    expect(running.inFlight()).toBe(0);

    const refused = { allowed: false as const, refusal: { period: 'day', limit: 1, retryAfterSeconds: 5 } };
    const failing = () => {
      throw new Error('settling failed');
    };
    const throwingCommit = { allowed: true as const, reservation: { commit: failing, release: failing } };
    const throwsAtOnce: Forwarder = {
      forward() {
        throw new Error('thrown before a promise');
      },
    };
    const cases = [
      { inner: answering, reserve: () => throwingCommit, error: 'settling failed' },
      { inner: throwsAtOnce, reserve: () => throwingCommit, error: 'settling failed' },
      { inner: answering, reserve: () => Promise.resolve(throwingCommit), error: 'settling failed' },
      { inner: answering, reserve: () => refused, error: 'quota' },
      {
        inner: throwsAtOnce,
        reserve: () => ({ allowed: true as const, reservation: { commit: () => 0, release: () => 0 } }),
        error: 'thrown before a promise',
      },
      {
        inner: answering,
        reserve: () => {
          throw new Error('reserve failed');
        },
        error: 'reserve failed',
      },
    ];
    for (const { inner, reserve, error } of cases) {
      const guarded = quotaGuarded(inner, { id: 'acct' }, { reserve } as never);
      const res = { locals: {} } as Response;
      let call: Promise<unknown> | undefined;
      expect(() => {
        call = guarded.forwarder.forward(req, res, { route: 'plan', method: 'GET', path: '/x' });
      }).not.toThrow(); // a rejection, never a throw
      await expect(call).rejects.toThrow(new RegExp(error, 'i'));
      expect(guarded.inFlight()).toBe(0);
    }
  });

  test('a caller who hung up is counted by the ledger on the turn after the call settled, the call no longer in flight', async () => {
    const reserve = () => ({
      allowed: true as const,
      reservation: { commit: () => undefined, release: () => undefined },
    });
    const guarded = quotaGuarded(answering, { id: 'acct' }, { reserve });
    const counted: number[] = [];
    const res = { locals: { usagePending: () => counted.push(guarded.inFlight()) } } as unknown as Response;
    await guarded.forwarder.forward(req, res, { route: 'plan', method: 'GET', path: '/x' });
    expect(counted).toEqual([]); // on the next turn of the event loop, not before the caller has its answer
    await new Promise((resolve) => setImmediate(resolve));
    expect(counted).toEqual([0]);
  });
});
