// Revalidation on a fake clock: due only after the interval, once per session across replicas sharing a store,
// the newest refresh token always presented, a refusal ends the session, an outage keeps it and backs off.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { type ProviderGrant, RefreshRefused, type RelyingParty } from '../../../src/sessions/relying-party';
import { createRevalidation, type Revalidation } from '../../../src/sessions/revalidation';
import { createMemorySessionIndex } from '../../../src/sessions/session-index';
import { createSessionStore, type SessionStore } from '../../../src/sessions/session-store';
import { createMemoryTokenStore } from '../../../src/store/memory-token-store';
import { createRecordSeal } from '../../../src/tokens/internal/record-seal';
import { createTokenCipher } from '../../../src/tokens/internal/token-cipher';
import { FakeClock } from '../tokens/token-fakes';

const INTERVAL = 300_000;

/** A provider with rotating refresh tokens: each token works once; a spent one is refused. */
class RotatingProvider {
  private live = new Set<string>(['rt-0']);
  private issued = 0;
  refreshes = 0;
  refused = 0;
  outage = false;
  /** The subject of the ID tokens it hands out on refresh. */
  sub = 'alice';
  async refresh(token: string): Promise<ProviderGrant> {
    if (this.outage) throw new TypeError('fetch failed');
    if (!this.live.delete(token)) {
      this.refused++;
      throw new RefreshRefused('invalid_grant');
    }
    this.refreshes++;
    const next = `rt-${++this.issued}`;
    this.live.add(next);
    return { claims: { sub: this.sub, groups: ['ops'] }, refreshToken: next };
  }
  revokeAll(): void {
    this.live.clear();
  }
}

function fleet(replicas: number, logLines: string[] = []) {
  const clock = new FakeClock();
  const memory = createMemoryTokenStore({ now: clock.now });
  /** Writes of a session's grant that fail as if Redis were unreachable for a moment. */
  const outage = { grantWritesToFail: 0, message: 'Connection is closed.' };
  const store = {
    ...memory,
    async set(key: string, value: string, ttlMs: number) {
      if (key.endsWith(':grant') && outage.grantWritesToFail > 0) {
        outage.grantWritesToFail--;
        throw new Error(outage.message);
      }
      return memory.set(key, value, ttlMs);
    },
  };
  const seal = createRecordSeal(createTokenCipher(randomBytes(32)), { inc: () => undefined });
  const sessions: SessionStore = createSessionStore({
    store,
    index: createMemorySessionIndex(clock),
    seal,
    clock,
    timeouts: { idleMs: 3_600_000, absoluteMs: 43_200_000 },
    keyPrefix: 'bff:',
    owner: 'https://idp.example web-app',
  });
  const provider = new RotatingProvider();
  const rp = { refresh: (token: string) => provider.refresh(token) } as unknown as RelyingParty;
  const members: Revalidation[] = Array.from({ length: replicas }, () =>
    createRevalidation({
      sessions,
      store,
      relyingParty: () => rp,
      clock,
      logger: pino({ level: 'info' }, { write: (line: string) => logLines.push(line) }),
      intervalMs: INTERVAL,
      lockTtlMs: 15_000,
      grantFrom: (grant, previous, now) => ({
        claimValues: [...previous.claimValues],
        revalidatedAt: now,
        refreshToken: grant.refreshToken ?? previous.refreshToken,
      }),
    }),
  );
  return { clock, sessions, provider, members, outage };
}

async function touchAll(f: ReturnType<typeof fleet>, id: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    for (const member of f.members) {
      const open = await f.sessions.open(id);
      if (open) member.whenDue(id, open.record);
    }
  }
  await Promise.all(f.members.map((member) => member.idle()));
}

describe('session revalidation', () => {
  it('refreshes once per interval across three replicas, always with the newest rotating token', async () => {
    const f = fleet(3);
    const { id } = await f.sessions.create({ sub: 'alice', claimValues: ['ops'], refreshToken: 'rt-0' });
    await touchAll(f, id, 5);
    expect(f.provider.refreshes).toBe(0);
    for (let interval = 1; interval <= 4; interval++) {
      await f.clock.advance(INTERVAL);
      await touchAll(f, id, 5);
      expect(f.provider.refreshes).toBe(interval);
    }
    expect(f.provider.refused).toBe(0);
    expect((await f.sessions.peek(id))?.refreshToken).toBe('rt-4');
  });

  it('a refused refresh ends the session', async () => {
    const f = fleet(2);
    const { id } = await f.sessions.create({ sub: 'alice', claimValues: ['ops'], refreshToken: 'rt-0' });
    f.provider.revokeAll();
    await f.clock.advance(INTERVAL);
    await touchAll(f, id, 1);
    expect(await f.sessions.open(id)).toBeUndefined();
  });

  it('a provider outage keeps the session, backs off, and refreshes once it is back', async () => {
    const f = fleet(1);
    const { id } = await f.sessions.create({ sub: 'alice', claimValues: ['ops'], refreshToken: 'rt-0' });
    f.provider.outage = true;
    await f.clock.advance(INTERVAL);
    await touchAll(f, id, 3);
    expect(await f.sessions.open(id)).toBeDefined();
    f.provider.outage = false;
    // Within the back-off this replica does not try again.
    await touchAll(f, id, 3);
    expect(f.provider.refreshes).toBe(0);
    await f.clock.advance(30_000);
    await touchAll(f, id, 3);
    expect(f.provider.refreshes).toBe(1);
    expect(await f.sessions.open(id)).toBeDefined();
  });

  it("an ID token of another user at refresh ends the session: the other user's claims are never taken", async () => {
    const f = fleet(1);
    const { id } = await f.sessions.create({ sub: 'alice', claimValues: [], refreshToken: 'rt-0' });
    f.provider.sub = 'mallory';
    await f.clock.advance(INTERVAL);
    await touchAll(f, id, 1);
    expect(f.provider.refreshes).toBe(1);
    expect(await f.sessions.peek(id)).toBeUndefined();
  });

  it('a store blip right after a refresh does not lose the rotated refresh token (the session survives the next interval)', async () => {
    const f = fleet(1);
    const { id } = await f.sessions.create({ sub: 'alice', claimValues: ['ops'], refreshToken: 'rt-0' });
    await f.clock.advance(INTERVAL);
    f.outage.grantWritesToFail = 2;
    await touchAll(f, id, 1);
    expect(f.provider.refreshes).toBe(1);
    expect((await f.sessions.peek(id))?.refreshToken).toBe('rt-1');
    await f.clock.advance(INTERVAL);
    await touchAll(f, id, 1);
    expect(f.provider.refused).toBe(0);
    expect(await f.sessions.open(id)).toBeDefined();
  });

  it('a store failure that outlasts every retry is logged by its name, never by its message', async () => {
    const lines: string[] = [];
    const f = fleet(1, lines);
    const { id } = await f.sessions.create({ sub: 'alice', claimValues: ['ops'], refreshToken: 'rt-0' });
    await f.clock.advance(INTERVAL);
    f.outage.grantWritesToFail = 4;
    f.outage.message = 'write of rt-1 to redis://:hunter2@redis.internal failed';
    await touchAll(f, id, 1);
    const failed = lines.filter((line) => line.includes('session.revalidation_failed'));
    expect(failed).toHaveLength(1);
    expect(JSON.parse(failed[0] ?? '{}')).toMatchObject({ error: 'Error' });
    expect(lines.join('\n')).not.toMatch(/hunter2|rt-1|redis:\/\//);
  });

  it('a session without a refresh token is never revalidated', async () => {
    const f = fleet(1);
    const { id } = await f.sessions.create({ sub: 'alice', claimValues: [] });
    await f.clock.advance(INTERVAL * 3);
    await touchAll(f, id, 2);
    expect(f.provider.refreshes + f.provider.refused).toBe(0);
  });
});
