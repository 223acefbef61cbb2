// The doctor's reading of the fleet's login back-off for one account: how long is left, what the last refusal was,
// and whether the doctor may log in (only when the fleet would, or with --force-login).
import { DEFAULT_EGRESS } from '../tls/local-address';
import type { BackoffRecord, FleetBackoffState } from '../tokens';

/** The back-off as the doctor could see it: the fleet's shared record, or no shared store at all. */
export type BackoffCheck = FleetBackoffState | { readonly kind: 'unshared'; readonly reason: string };

/** The account as the doctor's lines name it. */
export interface AccountLabel {
  readonly id: string;
  readonly localAddress?: string;
}

export interface BackoffStep {
  readonly title: string;
  readonly state: 'pass' | 'warn' | 'fail';
  readonly detail: string;
  readonly fix?: string;
}

export const FORCE_LOGIN_FLAG = '--force-login';

export const backoffTitle = (account: AccountLabel) => `login back-off (account ${account.id})`;

/** Whether the doctor logs in: only when the fleet would (no back-off known), or when forced. */
export function mayLogIn(check: BackoffCheck, forceLogin: boolean): boolean {
  return forceLogin || check.kind === 'clear' || check.kind === 'unshared';
}

/** "14 min 5 s", "42 s", "1 h 3 min": what an operator reads at a glance. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(1, Math.ceil(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min${seconds % 60 ? ` ${seconds % 60} s` : ''}`;
  return `${Math.floor(minutes / 60)} h${minutes % 60 ? ` ${minutes % 60} min` : ''}`;
}

/** The egress address an account's sockets use, in words. */
export function egressOf(account: AccountLabel): string {
  return account.localAddress ? `${account.localAddress} (its localAddress)` : DEFAULT_EGRESS;
}

/** The last failure in words: 401 credentials vs 403 IP vs a transient failure, with the streak and when. */
export function describeFailure(record: BackoffRecord, account: AccountLabel): string {
  const when = new Date(record.at).toISOString();
  const streak = record.streak > 1 ? `, ${record.streak} in a row` : '';
  const what =
    record.reason === 'UPSTREAM_AUTH_FAILED'
      ? record.tokenRejected
        ? '401, the provider refused the tokens it issued'
        : '401, the provider refused the credentials'
      : record.reason === 'UPSTREAM_IP_NOT_WHITELISTED'
        ? `403, the provider refused the IP address (account ${account.id} sends from ${egressOf(account)})`
        : `${record.reason === 'UPSTREAM_TIMEOUT' ? 'a timeout' : 'a 5xx/429 or unreachable'} of the token endpoint`;
  return `${what}${streak}, at ${when}`;
}

/** The step line for the fleet's back-off of one account. */
export function diagnoseBackoff(
  check: BackoffCheck,
  account: AccountLabel,
  forceLogin: boolean,
): BackoffStep {
  const title = backoffTitle(account);
  if (check.kind === 'unshared') return { title, state: 'pass', detail: check.reason };
  if (check.kind === 'unknown')
    return {
      title,
      state: 'warn',
      detail: `cannot be read (the token store did not answer): replicas may be backing off on their own${
        forceLogin ? `; logging in anyway (${FORCE_LOGIN_FLAG})` : ', so the doctor does not log in'
      }`,
      fix: `fix the token store first; ${FORCE_LOGIN_FLAG} tries one login anyway`,
    };
  if (check.kind === 'clear') {
    const last = check.lastRefusal
      ? ` (the last refusal, ${describeFailure(check.lastRefusal, account)}, has waited its time)`
      : '';
    const other = check.otherCredentialsRefused
      ? '; a refusal of earlier credentials is on record, these start clean'
      : '';
    return { title, state: 'pass', detail: `none: the fleet would log in now${last}${other}` };
  }
  const left = formatDuration(check.remainingMs);
  const forcing = forceLogin
    ? `; logging in once anyway (${FORCE_LOGIN_FLAG})`
    : '; the doctor does not log in (it would only lengthen the lock-out risk)';
  return {
    title,
    state: 'fail',
    detail: `the fleet is backing off, ${left} left; last failure: ${describeFailure(check.record, account)}${forcing}`,
    fix: backoffFix(check, account),
  };
}

function backoffFix(
  check: Extract<FleetBackoffState, { kind: 'backing-off' }>,
  account: AccountLabel,
): string {
  const retry = `wait ${formatDuration(check.remainingMs)}, or run \`npm run doctor -- ${FORCE_LOGIN_FLAG}\` for one login now (it counts toward the provider's lock-out)`;
  if (check.cause === 'transient') return `the provider's token endpoint is failing; ${retry}`;
  if (check.record.reason === 'UPSTREAM_IP_NOT_WHITELISTED')
    return `ask the provider to whitelist ${account.localAddress ?? "the host's egress IP"} for account ${account.id}; then ${retry}`;
  return `correct the credentials of account ${account.id} (new credentials end the back-off at once on every replica); or ${retry}`;
}
