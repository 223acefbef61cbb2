// Uses each session's refresh token at the provider every interval, once for the whole fleet, in the background.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock, TokenStore } from '../tokens';
import { type ProviderGrant, RefreshRefused, type RelyingParty } from './relying-party';
import type { SessionGrant, SessionRecord, SessionStore } from './session-store';

export interface RevalidationDeps {
  readonly sessions: SessionStore;
  /** The fleet lock (SET NX PX with an owner, released only by its owner) of the token store. */
  readonly store: Pick<TokenStore, 'acquireLock' | 'releaseLock'>;
  readonly relyingParty: () => RelyingParty | undefined;
  readonly clock: Pick<Clock, 'now'>;
  readonly logger: Logger;
  readonly intervalMs: number;
  /** Lease of a session's lock: longer than a refresh may take (TOKEN_LOCK_TTL_MS). */
  readonly lockTtlMs: number;
  /** What the claims of a refreshed ID token make of the stored grant. */
  readonly grantFrom: (grant: ProviderGrant, previous: SessionRecord, now: number) => SessionGrant;
}

/** After a provider outage, this replica waits this long before trying the same session again. */
const OUTAGE_RETRY_MS = 30_000;
const MAX_REMEMBERED_OUTAGES = 100_000;
/** Pauses before writing a refreshed grant again: a store blip must not lose a rotated (already spent) token. */
const GRANT_WRITE_PAUSES_MS = [50, 200, 500];

export interface Revalidation {
  /** Starts a revalidation in the background when the session is due; never delays or fails the request. */
  whenDue(id: string, record: SessionRecord): void;
  /** Settles when every revalidation this replica started has ended (tests, shutdown). */
  idle(): Promise<void>;
}

/**
 * Only the holder of the session's lock reads the refresh token, and it reads it after taking the lock, so it always
 * holds the newest one: with rotating refresh tokens no replica ever presents a spent token. The holder checks again
 * that the session is still due, so a replica that took the lock just after another finished does not refresh twice.
 * A refusal ends the session; an outage keeps it (the next request after OUTAGE_RETRY_MS tries again).
 */
export function createRevalidation(deps: RevalidationDeps): Revalidation {
  const { sessions, store, clock, logger, intervalMs, lockTtlMs } = deps;
  const running = new Map<string, Promise<void>>();
  const retryAfter = new Map<string, number>();
  const due = (record: SessionRecord, now: number) =>
    record.refreshToken !== undefined && now - record.revalidatedAt >= intervalMs;

  const revalidate = async (id: string, rp: RelyingParty): Promise<void> => {
    const lock = sessions.lockKey(id);
    const owner = randomBytes(12).toString('hex');
    if (!(await store.acquireLock(lock, owner, lockTtlMs))) return;
    try {
      const current = await sessions.peek(id);
      const now = clock.now();
      if (!current?.refreshToken || !due(current, now)) return;
      let grant: ProviderGrant;
      try {
        grant = await rp.refresh(current.refreshToken);
      } catch (error) {
        await refreshFailed(error, id, now, { sessions, logger, retryAfter });
        return;
      }
      // OIDC Core 12.2: a refreshed ID token names the same user; another's claims must never become this session's.
      if (grant.claims.sub !== undefined && grant.claims.sub !== current.sub) {
        await sessions.destroy(id);
        logger.warn(
          { event: 'session.revalidation_refused', error: 'sub_mismatch' },
          'session ended: the refreshed ID token names another user',
        );
        return;
      }
      await replaceGrantPatiently(sessions, id, deps.grantFrom(grant, current, now));
    } finally {
      await store.releaseLock(lock, owner).catch(() => undefined);
    }
  };

  return {
    whenDue(id, record) {
      const now = clock.now();
      if (!due(record, now) || running.has(id) || (retryAfter.get(id) ?? 0) > now) return;
      const rp = deps.relyingParty();
      if (!rp) return;
      retryAfter.delete(id);
      const run = revalidate(id, rp)
        .catch((error: unknown) => {
          logger.warn(
            // The name only, as in refreshFailed: a message may quote a URL or a token.
            { event: 'session.revalidation_failed', error: errorName(error) },
            'session revalidation failed',
          );
        })
        .finally(() => running.delete(id));
      running.set(id, run);
    },
    async idle() {
      while (running.size > 0) await Promise.all([...running.values()]);
    },
  };
}

/**
 * The provider refused the refresh token: the session ends. Anything else (an outage, a refusal of the gateway
 * itself) keeps it, and this replica tries the same session again only after OUTAGE_RETRY_MS.
 */
async function refreshFailed(
  error: unknown,
  id: string,
  now: number,
  {
    sessions,
    logger,
    retryAfter,
  }: { sessions: SessionStore; logger: Logger; retryAfter: Map<string, number> },
): Promise<void> {
  if (error instanceof RefreshRefused) {
    await sessions.destroy(id);
    logger.info(
      { event: 'session.revalidation_refused', error: error.error },
      'session ended: the provider refused its refresh',
    );
    return;
  }
  // Bounded: during a long outage every active session lands here once; the oldest entries go first.
  if (retryAfter.size >= MAX_REMEMBERED_OUTAGES) retryAfter.delete(retryAfter.keys().next().value as string);
  retryAfter.set(id, now + OUTAGE_RETRY_MS);
  const providerError = (error as { error?: unknown }).error;
  logger.warn(
    {
      event: 'session.revalidation_failed',
      error: errorName(error),
      ...(typeof providerError === 'string' ? { providerError: providerError.slice(0, 64) } : {}),
    },
    'session kept: the provider could not be reached or refused the gateway itself',
  );
}

/** Writes the refreshed grant, pausing and trying again after a store failure: it holds an already rotated token. */
async function replaceGrantPatiently(sessions: SessionStore, id: string, fresh: SessionGrant): Promise<void> {
  for (const pause of [...GRANT_WRITE_PAUSES_MS, undefined]) {
    try {
      await sessions.replaceGrant(id, fresh);
      return;
    } catch (error) {
      if (pause === undefined) throw error;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}
