// A provider that never answers its token endpoint: revalidation gives up while it still holds the session's lock,
// so no other replica can take the lock and present the same refresh token while this one's is still in flight.
import pino from 'pino';
import { providerTimeoutSeconds } from '../../../src/sessions/relying-party';
import type { TokenStore } from '../../../src/tokens/internal/token-store';
import { type FakeProvider, sessionsAt, startFakeProvider } from './fake-provider';

let provider: FakeProvider;
beforeAll(async () => {
  provider = await startFakeProvider();
});
afterAll(() => provider.close());

describe('a provider that does not answer', () => {
  it('revalidation gives up on the refresh before its lock lease ends, and keeps the session', async () => {
    const lockTtlMs = 1500;
    let lockKey = '';
    let store: TokenStore | undefined;
    // Looked at when revalidation logs that it gave up, before it releases its lock (the memory store reads at once).
    let lockHeldWhenAbandoned: Promise<string | undefined> | undefined;
    const logger = pino(
      { level: 'warn' },
      {
        write(line: string) {
          if (line.includes('session.revalidation_failed')) lockHeldWhenAbandoned ??= store?.get(lockKey);
        },
      },
    );
    provider.tokenEndpoint = () => undefined;
    const gateway = sessionsAt(provider, { lockTtlMs, logger });
    store = gateway.store;
    const { id } = await gateway.sessions.sessions.create({
      sub: 'alice',
      claimValues: [],
      refreshToken: 'rt',
    });
    // Due now: its last revalidation long ago.
    await gateway.sessions.sessions.replaceGrant(id, {
      claimValues: [],
      revalidatedAt: 0,
      refreshToken: 'rt',
    });
    lockKey = gateway.sessions.sessions.lockKey(id);
    const record = await gateway.sessions.sessions.peek(id);
    if (!record) throw new Error('no session');
    gateway.sessions.revalidation.whenDue(id, record);
    await gateway.sessions.revalidation.idle();
    expect(lockHeldWhenAbandoned).toBeDefined();
    expect(await lockHeldWhenAbandoned).toBeDefined();
    expect(await gateway.sessions.sessions.peek(id)).toBeDefined();
  });

  it('discovery plus refresh fit in the lock lease for every TOKEN_LOCK_TTL_MS allowed', () => {
    for (const lockTtlMs of [1000, 1500, 5000, 15_000, 30_000, 120_000]) {
      const seconds = providerTimeoutSeconds(lockTtlMs);
      expect(seconds).toBeGreaterThan(0);
      expect(2 * seconds * 1000).toBeLessThan(lockTtlMs);
    }
  });
});
