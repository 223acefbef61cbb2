// Guessed session cookies count as failed authentications of the client address, as wrong API keys do: past
// AUTH_FAILURE_LIMIT the address is refused 429 instead of costing a store lookup per request.
import { randomBytes } from 'node:crypto';
import { SESSION_COOKIE } from '../../../src/sessions/cookies';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startTestGateway({ AUTH_FAILURE_LIMIT: '3', AUTH_FAILURE_WINDOW_SECONDS: '60' });
});
afterAll(() => gateway.close());

it('a flood of made-up session ids from one address is blocked like a flood of wrong API keys', async () => {
  const statuses: number[] = [];
  for (let i = 0; i < 8; i++) {
    const answer = await fetch(`${gateway.url}${PLAN}`, {
      headers: { 'x-csrf': '1', cookie: `${SESSION_COOKIE}=${randomBytes(32).toString('base64url')}` },
    });
    statuses.push(answer.status);
  }
  expect(statuses.slice(0, 3)).toEqual([401, 401, 401]);
  expect(statuses.at(-1)).toBe(429);
  // The address is blocked for API keys too: one failure budget per address, whatever the credential.
  const key = await fetch(`${gateway.url}${PLAN}`, { headers: { 'x-api-key': 'wrong' } });
  expect(key.status).toBe(429);
});
