// A Cookie header stuffed with session cookies: logout looks up a bounded number of them, never one per copy.
import request from 'supertest';
import { SESSION_COOKIE } from '../../../src/sessions/cookies';
import { newSessionId } from '../../../src/sessions/session-store';
import { createMemoryTokenStore } from '../../../src/store/memory-token-store';
import { type FakeProvider, sessionsAt, startFakeProvider } from './fake-provider';

let provider: FakeProvider;
beforeAll(async () => {
  provider = await startFakeProvider();
});
afterAll(() => provider.close());

it('a logout with 200 session cookies reads the store a bounded number of times, and ends a real one among the first', async () => {
  const memory = createMemoryTokenStore();
  let reads = 0;
  const store = {
    ...memory,
    get: (key: string) => {
      reads++;
      return memory.get(key);
    },
  };
  const gateway = sessionsAt(provider, { store });
  const { id } = await gateway.sessions.sessions.create({ sub: 'alice', claimValues: [] });
  const planted = Array.from({ length: 200 }, () => `${SESSION_COOKIE}=${newSessionId()}`);
  reads = 0;
  const answer = await request(gateway.app)
    .post('/bff/logout')
    .set('x-csrf', '1')
    .set('cookie', [`${SESSION_COOKIE}=${id}`, ...planted].join('; '));
  expect(answer.status).toBe(200);
  expect(reads).toBeLessThanOrEqual(8);
  expect(await gateway.sessions.sessions.peek(id)).toBeUndefined();
});
