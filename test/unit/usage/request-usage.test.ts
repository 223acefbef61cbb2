// The usage ledger's hook at the end of a request: which column each outcome left in res.locals counts in.
import type { Request, Response } from 'express';
import type { Caller } from '../../../src/callers/caller';
import { requestUsageRecorder } from '../../../src/usage';

const caller = { id: 'shop', accounts: ['main'] } as unknown as Caller;

function finish(locals: Record<string, unknown>, who: Caller | null = caller) {
  const rows: string[] = [];
  const record = requestUsageRecorder(
    {
      record: (client, account, operation, column) =>
        rows.push(`${client} ${account} ${operation} ${column}`),
    },
    new Set(['validation', 'plan']),
    (c) => c.accounts?.[0],
  );
  record({ caller: who ?? undefined } as Request, { locals } as unknown as Response);
  return rows;
}

describe('requestUsageRecorder', () => {
  test('a billable provider answer counts its class and billable', () => {
    expect(
      finish({ route: 'plan', account: 'main', upstreamStatus: 404, upstreamAnswers: 1, billable: true }),
    ).toEqual(['shop main plan answers4xx', 'shop main plan billable']);
  });

  test('a 401 retried counts both answers; a 5xx is not billable', () => {
    expect(
      finish({ route: 'plan', account: 'main', upstreamStatus: 200, upstreamAnswers: 2, billable: true }),
    ).toEqual(['shop main plan answers4xx', 'shop main plan answers2xx', 'shop main plan billable']);
    expect(
      finish({
        route: 'validation',
        account: 'main',
        upstreamStatus: 503,
        upstreamAnswers: 1,
        billable: false,
      }),
    ).toEqual(['shop main validation answers5xx']);
  });

  test('a provider redirect ends the call as a failure (answered 502): counted with the 5xx, never billed', () => {
    expect(
      finish({ route: 'plan', account: 'main', upstreamStatus: 301, upstreamAnswers: 1, billable: false }),
    ).toEqual(['shop main plan answers5xx']);
  });

  test('cache hits, coalesced followers, timeouts and refusals', () => {
    expect(finish({ route: 'plan', account: 'main', cache: 'hit' })).toEqual(['shop main plan cacheHits']);
    expect(finish({ route: 'plan', account: 'main', coalesced: true })).toEqual(['shop main plan coalesced']);
    expect(finish({ route: 'plan', account: 'main', refusal: 'UPSTREAM_TIMEOUT' })).toEqual([
      'shop main plan timeouts',
    ]);
    expect(finish({ route: 'plan', account: 'main', refusal: 'QUOTA_EXCEEDED' })).toEqual([
      'shop main plan refused:QUOTA_EXCEEDED',
    ]);
  });

  test("a refusal before the account was chosen counts on the client's default account", () => {
    expect(finish({ route: 'validation', refusal: 'RATE_LIMITED' })).toEqual([
      'shop main validation refused:RATE_LIMITED',
    ]);
  });

  test('a replay of an Idempotency-Key answer costs the provider nothing: not counted, nothing left pending', () => {
    const locals: Record<string, unknown> = { route: 'validation', account: 'main', replayed: true };
    expect(finish(locals)).toEqual([]);
    expect(locals.usagePending).toBeUndefined();
  });

  test('anonymous callers and other routes are not counted', () => {
    expect(finish({ route: 'plan', refusal: 'CLIENT_UNAUTHENTICATED' }, null)).toEqual([]);
    expect(finish({ route: 'readyz' })).toEqual([]);
  });
});
