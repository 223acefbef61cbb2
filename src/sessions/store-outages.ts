// Store failures (Redis unreachable) of sessions, logins and logout tokens turned into 503 answers.
import { GatewayError } from '../http/gateway-error';
import type { LoginStates } from './login-state';
import type { LogoutReplays } from './logout-replays';
import type { SessionStore } from './session-store';

/**
 * A session that cannot be read is neither trusted nor declared ended: the browser is told to retry rather than to
 * log in again.
 */
export function sessionsAnsweringOutages(sessions: SessionStore): SessionStore {
  return {
    create: (record) => answering(sessions.create(record)),
    open: (id) => answering(sessions.open(id)),
    peek: (id) => answering(sessions.peek(id)),
    replaceGrant: (id, grant) => answering(sessions.replaceGrant(id, grant)),
    destroy: (id) => answering(sessions.destroy(id)),
    destroyMatching: (match) => answering(sessions.destroyMatching(match)),
    lockKey: (id) => sessions.lockKey(id),
    endOf: (record) => sessions.endOf(record),
  };
}

export function loginsAnsweringOutages(logins: LoginStates): LoginStates {
  return {
    save: (state, pending) => answering(logins.save(state, pending)),
    take: (state) => answering(logins.take(state)),
  };
}

export function replaysAnsweringOutages(replays: LogoutReplays): LogoutReplays {
  return {
    firstUse: (issuer, jti) => answering(replays.firstUse(issuer, jti)),
    forget: (issuer, jti) => answering(replays.forget(issuer, jti)),
  };
}

function answering<T>(pending: Promise<T>): Promise<T> {
  return pending.catch((error: unknown) => {
    throw new GatewayError(
      'UPSTREAM_UNAVAILABLE',
      'The session store cannot be reached; try again shortly.',
      {
        status: 503,
        headers: { 'Retry-After': '1' },
        cause: error,
      },
    );
  });
}
