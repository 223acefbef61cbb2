// Fake provider accounts for runDoctor: each account's back-off and login answer, and what the doctor did with them.
import type { AccountSpec } from '../../../src/config/account-spec';
import type { AccountProbe, DoctorDeps, TokenAttempt } from '../../../src/operations/doctor';
import type { BackoffCheck } from '../../../src/operations/doctor-backoff';
import type { BudgetCheck } from '../../../src/operations/doctor-budget';

export const accountSpec = (id: string, localAddress?: string): AccountSpec => ({
  id,
  baseUrl: 'https://api.payments.example',
  credentials: { username: 'fake-user', password: 'fake-password' },
  staticHeaders: {},
  maxSockets: 8,
  timeoutMs: 1_000,
  ...(localAddress && { localAddress }),
});

export interface FakeAccount {
  readonly account: AccountSpec;
  readonly attempt: TokenAttempt;
  readonly backoff?: BackoffCheck;
  /** The fleet's budget record as read; absent: the probe has no budget reading (no line). */
  readonly budget?: BudgetCheck;
}

/** listAccounts/probeAccount over `entries`; `logins` and `shared` record what the doctor asked for, in order. */
export function fakeAccounts(...entries: FakeAccount[]) {
  const logins: string[] = [];
  const shared: string[] = [];
  const closed: string[] = [];
  const deps: Pick<DoctorDeps, 'listAccounts' | 'probeAccount'> = {
    listAccounts: async () => ({ accounts: entries.map((e) => e.account), close: async () => undefined }),
    probeAccount: async (_config, account): Promise<AccountProbe> => {
      const entry = entries.find((e) => e.account.id === account.id) as FakeAccount;
      return {
        readBackoff: async () => entry.backoff ?? { kind: 'clear', otherCredentialsRefused: false },
        requestToken: async () => {
          logins.push(account.id);
          return entry.attempt;
        },
        shareRefusal: async (reason) => {
          shared.push(`${account.id}:${reason}`);
          return { reason, at: 0, waitMs: 20_000, streak: 1, credentials: 'fp' };
        },
        ...(entry.budget && { readBudget: async () => entry.budget as BudgetCheck }),
        close: async () => {
          closed.push(account.id);
        },
      };
    },
  };
  return { deps, logins, shared, closed };
}

/** One account `default` answering `attempt`. */
export const oneAccount = (attempt: TokenAttempt, backoff?: BackoffCheck) =>
  fakeAccounts({ account: accountSpec('default'), attempt, backoff }).deps;
