import type { NextFunction, Request, Response } from 'express';
import type { Account } from '../../../src/accounts/account';
import { chooseAccount } from '../../../src/accounts/choose-account';
import type { Caller } from '../../../src/callers/caller';
import { GatewayError } from '../../../src/http/gateway-error';

const account = (id: string) => ({ id, hold: () => () => {} }) as unknown as Account;
const running = new Map([
  ['sandbox', account('sandbox')],
  ['production', account('production')],
]);

function choose(
  caller: Partial<Caller> | undefined,
  header: string | string[] | undefined,
  accounts = { get: (id: string) => running.get(id), soleId: () => undefined as string | undefined },
) {
  const req = {
    caller:
      caller && ({ id: 'checkout', scopes: new Set(), via: 'api-key', origins: [], ...caller } as Caller),
    headers: header === undefined ? {} : { 'x-upstream-account': header },
  } as unknown as Request;
  const headers: Record<string, string> = {};
  const closeListeners: (() => void)[] = [];
  const res = {
    locals: {},
    setHeader: (name: string, value: string) => (headers[name] = value),
    on: (event: string, listener: () => void) => {
      if (event === 'close') closeListeners.push(listener);
    },
  } as unknown as Response;
  let passed: unknown = 'not called';
  chooseAccount(accounts)(req, res, ((error?: unknown) => {
    passed = error;
  }) as NextFunction);
  const error = passed instanceof GatewayError ? `${passed.status} ${passed.reason}` : passed;
  const closed = () => {
    for (const listener of closeListeners) listener();
  };
  const outcome = {
    error,
    chosen: req.account?.id,
    header: headers['x-upstream-account'],
    locals: res.locals,
  };
  // Not enumerable: the tests compare outcomes whole.
  return Object.defineProperty(outcome, 'closed', { value: closed }) as typeof outcome & { closed(): void };
}

describe('chooseAccount', () => {
  const caller = { accounts: ['sandbox', 'production'] };

  test('holds the chosen unit open until the answer is sent (a reload drains it, never closes it under the request)', () => {
    let held = 0;
    const unit = {
      id: 'sandbox',
      hold: () => {
        held++;
        return () => held--;
      },
    } as unknown as Account;
    const chosen = choose(caller, undefined, { get: () => unit, soleId: () => undefined });
    expect(held).toBe(1);
    chosen.closed();
    expect(held).toBe(0);
  });

  test("without the header, the caller's first account; the answer and the log name it", () => {
    const chosen = choose(caller, undefined);
    expect(chosen).toEqual({
      error: undefined,
      chosen: 'sandbox',
      header: 'sandbox',
      locals: { account: 'sandbox' },
    });
  });

  test('the header picks another of the caller’s accounts', () => {
    expect(choose(caller, 'production')).toMatchObject({ error: undefined, chosen: 'production' });
  });

  test.each([
    ['empty', ''],
    ['too long', 'a'.repeat(65)],
    ['upper case', 'Sandbox'],
    ['two headers joined', 'sandbox, production'],
    ['Latin-1 bytes', 'sandbox\u00e9'],
    ['a dash at the end', 'sandbox-'],
    ['an array', ['sandbox', 'production']],
  ])('a malformed header (%s) is 400 INVALID_REQUEST and chooses nothing', (_what, value) => {
    expect(choose(caller, value)).toMatchObject({
      error: '400 INVALID_REQUEST',
      chosen: undefined,
      header: undefined,
    });
  });

  test('an account the caller may not use and one that does not exist get the same 403', () => {
    const foreign = choose({ accounts: ['production'] }, 'sandbox');
    const unknown = choose({ accounts: ['production'] }, 'nowhere');
    expect(foreign).toMatchObject({ error: '403 CLIENT_FORBIDDEN', chosen: undefined });
    expect(unknown).toEqual(foreign);
  });

  test('an account of the caller that is no longer configured is 503 naming it, never another account', () => {
    const removed = choose({ accounts: ['retired', 'sandbox'] }, undefined);
    expect(removed).toMatchObject({
      error: '503 UPSTREAM_UNAVAILABLE',
      chosen: undefined,
      header: undefined,
    });
  });

  test('a caller without accounts may use the only account, and none of several', () => {
    const one = { get: (id: string) => running.get(id), soleId: () => 'sandbox' };
    expect(choose({}, undefined, one)).toMatchObject({ error: undefined, chosen: 'sandbox' });
    expect(choose({}, 'production', one)).toMatchObject({ error: '403 CLIENT_FORBIDDEN' });
    expect(choose({}, undefined)).toMatchObject({ error: '403 CLIENT_FORBIDDEN', chosen: undefined });
  });

  test('an unauthenticated request is 401 (the guard stands after authentication)', () => {
    expect(choose(undefined, undefined)).toMatchObject({ error: '401 CLIENT_UNAUTHENTICATED' });
  });
});
