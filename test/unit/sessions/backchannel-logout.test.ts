// Back-channel logout against a provider that signs whatever a test asks: replays, tokens the spec forbids, wrong
// audience or issuer, ages; each refused 400 with the envelope and ending nothing.
import request from 'supertest';
import {
  BACKCHANNEL_EVENT,
  type FakeProvider,
  type SessionsAtFakeProvider,
  sessionsAt,
  startFakeProvider,
} from './fake-provider';

let provider: FakeProvider;
let gateway: SessionsAtFakeProvider;

beforeAll(async () => {
  provider = await startFakeProvider();
});
beforeEach(() => {
  gateway = sessionsAt(provider);
});
afterAll(() => provider.close());

const post = (token: string) =>
  request(gateway.app).post('/bff/backchannel-logout').type('form').send({ logout_token: token });

const signIn = (sub: string, sid?: string) =>
  gateway.sessions.sessions.create({ sub, sid, claimValues: [], refreshToken: 'rt' });

describe('back-channel logout', () => {
  it('accepts a valid token once: a replay of the same token (same jti) is refused and ends nothing', async () => {
    const first = await signIn('alice');
    const token = await provider.logoutToken({ sub: 'alice' });
    const answer = await post(token);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ended: 1 });
    expect(await gateway.sessions.sessions.peek(first.id)).toBeUndefined();

    // Alice logs in again: a replay of the captured token must not log her out.
    const again = await signIn('alice');
    const replay = await post(token);
    expect(replay.status).toBe(400);
    expect(replay.body.status.description).toBe('INVALID_REQUEST');
    expect(await gateway.sessions.sessions.peek(again.id)).toBeDefined();
  });

  it.each<[string, Record<string, unknown>]>([
    ['a nonce (forbidden in logout tokens)', { sub: 'alice', nonce: 'n' }],
    ['no events claim', { sub: 'alice', events: undefined }],
    ['an events claim without the back-channel event', { sub: 'alice', events: { other: {} } }],
    ['the event as null', { sub: 'alice', events: { [BACKCHANNEL_EVENT]: null } }],
    ['the event as a list', { sub: 'alice', events: { [BACKCHANNEL_EVENT]: [] } }],
    ['the event as a string', { sub: 'alice', events: { [BACKCHANNEL_EVENT]: 'x' } }],
    ['neither sid nor sub', {}],
    ['an empty sub and no sid', { sub: '' }],
    ['another audience', { sub: 'alice', aud: 'another-app' }],
    ['another issuer', { sub: 'alice', iss: 'https://evil.example' }],
    ['no jti', { sub: 'alice', jti: undefined }],
    ['no iat', { sub: 'alice', iat: undefined }],
    ['an iat an hour ahead', { sub: 'alice', iat: Math.floor(Date.now() / 1000) + 3600 }],
    ['an iat an hour ago', { sub: 'alice', iat: Math.floor(Date.now() / 1000) - 3600 }],
    ['an exp in the past', { sub: 'alice', exp: Math.floor(Date.now() / 1000) - 60 }],
  ])('refuses a token with %s, ending nothing', async (_name, claims) => {
    const session = await signIn('alice');
    const answer = await post(await provider.logoutToken(claims));
    expect(answer.status).toBe(400);
    expect(answer.body.status.description).toBe('INVALID_REQUEST');
    expect(await gateway.sessions.sessions.peek(session.id)).toBeDefined();
  });

  it('accepts a token from a provider whose clock is a few seconds ahead (as ID tokens are, within 30 s)', async () => {
    const session = await signIn('alice');
    const answer = await post(
      await provider.logoutToken({ sub: 'alice', iat: Math.floor(Date.now() / 1000) + 10 }),
    );
    expect(answer.status).toBe(200);
    expect(await gateway.sessions.sessions.peek(session.id)).toBeUndefined();
  });

  it('ends by sid only the sessions of that provider session, and by sid+sub only that user', async () => {
    const one = await signIn('alice', 'sid-1');
    const two = await signIn('alice', 'sid-2');
    expect((await post(await provider.logoutToken({ sid: 'sid-1', sub: 'bob' }))).body).toEqual({ ended: 0 });
    expect((await post(await provider.logoutToken({ sid: 'sid-1' }))).body).toEqual({ ended: 1 });
    expect(await gateway.sessions.sessions.peek(one.id)).toBeUndefined();
    expect(await gateway.sessions.sessions.peek(two.id)).toBeDefined();
  });
});
