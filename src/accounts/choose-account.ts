// Which provider account a request uses (SPEC §10): the caller's default, or the one X-Upstream-Account names among
// the caller's own. Decided once per request, after authentication and before any body is read.
import type { RequestHandler } from 'express';
import { ACCOUNT_ID_PATTERN } from '../config/account-spec';
import { GatewayError } from '../http/gateway-error';
import type { AccountSet } from './account-set';

export const ACCOUNT_HEADER = 'x-upstream-account';

const NONE: readonly string[] = [];

/**
 * Sets `req.account` and answers `X-Upstream-Account`, or refuses before anything is spent: a malformed header (empty,
 * too long, not the id alphabet, several headers joined by a comma) is 400 INVALID_REQUEST; an id the caller may not
 * use is 403 CLIENT_FORBIDDEN, the same answer whether or not that account exists (no enumeration); an account of
 * the caller's that is no longer configured is 503 UPSTREAM_UNAVAILABLE naming it, never another account instead.
 * A caller whose entry lists no accounts may use the only account when exactly one is configured.
 */
export function chooseAccount(accounts: Pick<AccountSet, 'get' | 'soleId'>): RequestHandler {
  return (req, res, next) => {
    const caller = req.caller;
    if (!caller) {
      next(new GatewayError('CLIENT_UNAUTHENTICATED', 'The request carries no credential.'));
      return;
    }
    const sole = accounts.soleId();
    const allowed = caller.accounts ?? (sole === undefined ? NONE : [sole]);
    const header = req.headers[ACCOUNT_HEADER];
    let id: string | undefined;
    if (header === undefined) {
      id = allowed[0];
      if (id === undefined) {
        next(
          new GatewayError(
            'CLIENT_FORBIDDEN',
            `The client "${caller.id}" may use no upstream account: its registry entry lists no "accounts" while several are configured.`,
          ),
        );
        return;
      }
    } else if (typeof header === 'string' && allowed.includes(header)) {
      // One of the caller's own ids (the registry checked their shape): no pattern to run on the common path.
      id = header;
    } else if (typeof header !== 'string' || !ACCOUNT_ID_PATTERN.test(header)) {
      next(
        new GatewayError(
          'INVALID_REQUEST',
          'The X-Upstream-Account header must be one account id (lower-case letters, digits and dashes).',
        ),
      );
      return;
    } else {
      next(
        new GatewayError(
          'CLIENT_FORBIDDEN',
          `The client "${caller.id}" may not use the upstream account named in X-Upstream-Account.`,
        ),
      );
      return;
    }
    const account = accounts.get(id);
    if (!account) {
      next(
        new GatewayError(
          'UPSTREAM_UNAVAILABLE',
          `The upstream account "${id}" is no longer configured at this gateway; ask its operator, or choose another of your accounts with X-Upstream-Account.`,
          { status: 503 },
        ),
      );
      return;
    }
    // The unit chosen stays open until the answer is sent: a reload that changes or removes the account meanwhile
    // drains it (bounded) instead of closing it under a request whose body is still arriving. 'close' is emitted
    // once per response and the release is idempotent: `on` spares the wrapper `once` allocates per request.
    res.on('close', account.hold());
    req.account = account;
    res.locals.account = id;
    res.setHeader(ACCOUNT_HEADER, id);
    next();
  };
}
