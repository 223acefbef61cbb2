// /bff/logout with the cookie of a session that has ended (idle or absolute) while its record is still stored: the
// ID token is never handed out, in neither end-session method (logout reads the session with peek, which checks both).
import request from 'supertest';
import { SESSION_COOKIE } from '../../../src/sessions/cookies';
import { FakeClock } from '../tokens/token-fakes';
import {
  type FakeProvider,
  type SessionsAtFakeProvider,
  sessionsAt,
  startFakeProvider,
} from './fake-provider';

const IDLE_SECONDS = 60;
const LIFETIME_SECONDS = 300;

let provider: FakeProvider;
beforeAll(async () => {
  provider = await startFakeProvider();
  provider.discoveryExtra = { end_session_endpoint: `${provider.issuer}/session/end` };
});
afterAll(() => provider.close());

/** A gateway whose sessions run on a fake clock; the memory store keeps records by the real one (never expires here). */
function gatewayAt(clock: FakeClock, endSessionMethod: 'get' | 'post' = 'get'): SessionsAtFakeProvider {
  return sessionsAt(provider, {
    clock,
    endSessionMethod,
    idleTimeoutSeconds: IDLE_SECONDS,
    maxLifetimeSeconds: LIFETIME_SECONDS,
  });
}

async function signedIn(gateway: SessionsAtFakeProvider): Promise<string> {
  const idToken = await provider.idToken({ sub: 'alice' });
  const { id } = await gateway.sessions.sessions.create({ sub: 'alice', claimValues: [], idToken });
  return id;
}

const logout = (gateway: SessionsAtFakeProvider, id: string) =>
  request(gateway.app).post('/bff/logout').set('x-csrf', '1').set('cookie', `${SESSION_COOKIE}=${id}`);

describe('logout with the cookie of a session that has ended', () => {
  it('a live session: the logout link carries its ID token (the control)', async () => {
    const clock = new FakeClock(Date.now());
    const gateway = gatewayAt(clock);
    const id = await signedIn(gateway);
    await clock.advance((IDLE_SECONDS - 1) * 1000);
    const answer = await logout(gateway, id);
    expect(answer.status).toBe(200);
    expect(new URL(answer.body.endSessionUrl).searchParams.get('id_token_hint')).toMatch(/^eyJ/);
  });

  const ended = [
    ['idle 63 s of a 60 s idle timeout', (IDLE_SECONDS + 3) * 1000, 0],
    // Used every 40 s (within the idle timeout) until past the absolute lifetime.
    ['past its absolute lifetime though used all along', LIFETIME_SECONDS * 1000 + 1_000, 40_000],
  ] as const;
  const cases = ended.flatMap(([name, elapsedMs, touchMs]) =>
    (['get', 'post'] as const).map((method) => [name, method, elapsedMs, touchMs] as const),
  );

  it.each(cases)(
    '%s (%s): no id_token_hint in the link, no form; the record is still stored',
    async (_name, method, elapsedMs, touchMs) => {
      const clock = new FakeClock(Date.now());
      const gateway = gatewayAt(clock, method);
      const id = await signedIn(gateway);
      let elapsed = 0;
      if (touchMs > 0)
        for (; elapsed + touchMs < elapsedMs; elapsed += touchMs) {
          await clock.advance(touchMs);
          expect(await gateway.sessions.sessions.open(id)).toBeDefined();
        }
      await clock.advance(elapsedMs - elapsed);
      // The ended session's record is still in the store: only the session's own clock says it ended.
      const grantKey = gateway.sessions.sessions.lockKey(id).replace(/:lock$/, ':grant');
      expect(await gateway.store.get(grantKey)).toBeDefined();
      const answer = await logout(gateway, id);
      expect(answer.status).toBe(200);
      expect(answer.body.loggedOut).toBe(true);
      expect(answer.body.endSessionForm).toBeNull();
      expect(new URL(answer.body.endSessionUrl).searchParams.has('id_token_hint')).toBe(false);
      expect(JSON.stringify(answer.body)).not.toMatch(/eyJ/);
    },
  );
});
