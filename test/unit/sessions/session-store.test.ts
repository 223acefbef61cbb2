// The session store on a fake clock: idle (sliding) and absolute expiry, opaque ids, sealed records.
import { randomBytes } from 'node:crypto';
import { createMemorySessionIndex } from '../../../src/sessions/session-index';
import {
  createSessionStore,
  SESSION_ID_PATTERN,
  type SessionStore,
} from '../../../src/sessions/session-store';
import { createMemoryTokenStore } from '../../../src/store/memory-token-store';
import { createRecordSeal } from '../../../src/tokens/internal/record-seal';
import { createTokenCipher } from '../../../src/tokens/internal/token-cipher';
import type { TokenStore } from '../../../src/tokens/internal/token-store';
import { FakeClock } from '../tokens/token-fakes';

const MINUTE = 60_000;
const IDLE = 30 * MINUTE;
const ABSOLUTE = 12 * 60 * MINUTE;

function setUp(key = randomBytes(32)) {
  const clock = new FakeClock();
  const tokens = createMemoryTokenStore({ now: clock.now });
  const rejected: string[] = [];
  const sessions = createSessionStore({
    store: tokens,
    index: createMemorySessionIndex(clock),
    seal: createRecordSeal(createTokenCipher(key), { inc: ({ kind }) => rejected.push(kind) }),
    clock,
    timeouts: { idleMs: IDLE, absoluteMs: ABSOLUTE },
    keyPrefix: 'bff:',
    owner: 'https://idp.example web-app',
  });
  return { clock, tokens, sessions, rejected };
}

const alice = { sub: 'alice', sid: 'provider-session-1', name: 'Alice', claimValues: ['ops'] };

const presenceKey = (sessions: SessionStore, id: string) => sessions.lockKey(id).replace(/:lock$/, '');
const grantKey = (sessions: SessionStore, id: string) => sessions.lockKey(id).replace(/:lock$/, ':grant');

async function rawOf(tokens: TokenStore, key: string): Promise<string> {
  const raw = await tokens.get(key);
  if (raw === undefined) throw new Error('no record');
  return raw;
}

describe('session store', () => {
  it("does not open, end or count another provider's or web app's session sharing the Redis, prefix and key", async () => {
    const clock = new FakeClock();
    const tokens = createMemoryTokenStore({ now: clock.now });
    const index = createMemorySessionIndex(clock);
    const seal = createRecordSeal(createTokenCipher(randomBytes(32)), { inc: () => undefined });
    const storeFor = (owner: string) =>
      createSessionStore({
        store: tokens,
        index,
        seal,
        clock,
        timeouts: { idleMs: IDLE, absoluteMs: ABSOLUTE },
        keyPrefix: 'bff:',
        owner,
      });
    const ops = storeFor('https://idp.example ops-console');
    const partners = storeFor('https://idp.example partner-portal');
    const otherIdp = storeFor('https://other-idp.example ops-console');
    const { id } = await ops.create(alice);
    expect(await partners.open(id)).toBeUndefined();
    expect(await otherIdp.open(id)).toBeUndefined();
    expect(await otherIdp.destroyMatching({ sid: alice.sid })).toBe(0);
    expect(await ops.open(id)).toBeDefined();
  });

  it('gives every session a fresh opaque 32-byte base64url id', async () => {
    const { sessions } = setUp();
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) ids.add((await sessions.create(alice)).id);
    expect(ids.size).toBe(20);
    for (const id of ids) {
      expect(id).toMatch(SESSION_ID_PATTERN);
      expect(Buffer.from(id, 'base64url')).toHaveLength(32);
    }
  });

  it('opens a live session and refuses an unknown or malformed id', async () => {
    const { sessions } = setUp();
    const { id } = await sessions.create(alice);
    expect((await sessions.open(id))?.record.sub).toBe('alice');
    expect(await sessions.open(randomBytes(32).toString('base64url'))).toBeUndefined();
    expect(await sessions.open(`${id}x`)).toBeUndefined();
    expect(await sessions.open('')).toBeUndefined();
    expect(await sessions.open('../../etc/passwd')).toBeUndefined();
  });

  it('ends a session left idle for the idle timeout', async () => {
    const { clock, sessions } = setUp();
    const { id } = await sessions.create(alice);
    await clock.advance(IDLE - 1);
    expect(await sessions.open(id)).toBeDefined();
    // Used just before the deadline: the idle clock restarts (sliding).
    await clock.advance(IDLE - 1);
    expect(await sessions.open(id)).toBeDefined();
    await clock.advance(IDLE);
    expect(await sessions.open(id)).toBeUndefined();
  });

  it('ends a session at its absolute lifetime however busy it is', async () => {
    const { clock, sessions } = setUp();
    const { id } = await sessions.create(alice);
    for (let used = 0; used < ABSOLUTE - 5 * MINUTE; used += 5 * MINUTE) {
      await clock.advance(5 * MINUTE);
      expect(await sessions.open(id)).toBeDefined();
    }
    await clock.advance(5 * MINUTE);
    expect(await sessions.open(id)).toBeUndefined();
  });

  it('ends a destroyed session, and every session of a provider session or user', async () => {
    const { sessions } = setUp();
    const one = await sessions.create(alice);
    const two = await sessions.create(alice);
    const other = await sessions.create({ ...alice, sid: 'provider-session-2' });
    const bob = await sessions.create({ sub: 'bob', sid: 'provider-session-3', claimValues: [] });
    await sessions.destroy(one.id);
    expect(await sessions.open(one.id)).toBeUndefined();
    expect(await sessions.destroyMatching({ sid: 'provider-session-1' })).toBe(1);
    expect(await sessions.open(two.id)).toBeUndefined();
    expect(await sessions.open(other.id)).toBeDefined();
    expect(await sessions.destroyMatching({ sub: 'alice' })).toBe(1);
    expect(await sessions.open(other.id)).toBeUndefined();
    expect(await sessions.open(bob.id)).toBeDefined();
  });

  it("does not end another user's session when the sid and sub of a logout do not pair", async () => {
    const { sessions } = setUp();
    const bob = await sessions.create({ sub: 'bob', sid: 'shared-sid', claimValues: [] });
    expect(await sessions.destroyMatching({ sid: 'shared-sid', sub: 'alice' })).toBe(0);
    expect(await sessions.open(bob.id)).toBeDefined();
  });

  it('stores no readable id, name or token in the store', async () => {
    const { tokens, sessions } = setUp();
    const { id } = await sessions.create({
      ...alice,
      refreshToken: 'refresh-secret-123',
      idToken: 'id.token.x',
    });
    const raw =
      (await rawOf(tokens, presenceKey(sessions, id))) + (await rawOf(tokens, grantKey(sessions, id)));
    expect(sessions.lockKey(id)).not.toContain(id);
    for (const secret of [id, 'refresh-secret-123', 'Alice', 'alice', 'id.token.x'])
      expect(raw).not.toContain(secret);
  });

  it('keeps a replaced grant when a request moves the idle clock afterwards (no stale refresh token written back)', async () => {
    const { clock, sessions } = setUp();
    const { id } = await sessions.create({ ...alice, refreshToken: 'first' });
    const seenBefore = await sessions.open(id);
    expect(seenBefore?.record.refreshToken).toBe('first');
    await clock.advance(5 * MINUTE);
    const grant = { claimValues: ['ops'], revalidatedAt: clock.now(), refreshToken: 'second' };
    expect(await sessions.replaceGrant(id, grant)).toBe(true);
    await sessions.open(id);
    expect((await sessions.peek(id))?.refreshToken).toBe('second');
    await sessions.destroy(id);
    expect(await sessions.replaceGrant(id, grant)).toBe(false);
    expect(await sessions.peek(id)).toBeUndefined();
  });

  it('refuses a record altered in the store, sealed with another key or moved under another id', async () => {
    const { tokens, sessions, rejected } = setUp();
    const { id } = await sessions.create(alice);
    const key = presenceKey(sessions, id);
    const raw = await rawOf(tokens, key);
    const bytes = Buffer.from(raw.slice(3), 'base64');
    bytes[20] ^= 1;
    await tokens.set(key, `v1:${bytes.toString('base64')}`, MINUTE);
    expect(await sessions.open(id)).toBeUndefined();

    const victim = await sessions.create({ sub: 'victim', claimValues: ['admins'] });
    const attacker = await sessions.create({ sub: 'attacker', claimValues: [] });
    // The victim's grant (its claims, so its scopes) copied under the attacker's session does not open.
    const victimGrant = await rawOf(tokens, grantKey(sessions, victim.id));
    await tokens.set(grantKey(sessions, attacker.id), victimGrant, MINUTE);
    expect(await sessions.open(attacker.id)).toBeUndefined();

    const forged = setUp();
    const plain = await forged.sessions.create(alice);
    await tokens.set(key, await rawOf(forged.tokens, presenceKey(forged.sessions, plain.id)), MINUTE);
    expect(await sessions.open(id)).toBeUndefined();
    expect(rejected).toEqual(['session', 'session', 'session']);
  });
});
