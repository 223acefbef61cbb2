// /bff/* arrives without a credential: a flood of login starts or logout tokens is rate limited per address.
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startTestGateway({
    RATE_LIMIT_DEFAULT_LIMIT: '5',
    RATE_LIMIT_DEFAULT_WINDOW_SECONDS: '60',
  });
});
afterAll(() => gateway.close());

test('past the default limit, /bff/login and /bff/backchannel-logout answer 429 before doing any work', async () => {
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++)
    statuses.push((await fetch(`${gateway.url}/bff/login`, { redirect: 'manual' })).status);
  expect(statuses).toEqual([303, 303, 303, 303, 303]);
  const login = await fetch(`${gateway.url}/bff/login`, { redirect: 'manual' });
  expect(login.status).toBe(429);
  expect(login.headers.get('location')).toBeNull();
  expect(login.headers.get('set-cookie')).toBeNull();
  const logout = await fetch(`${gateway.url}/bff/backchannel-logout`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'logout_token=x',
  });
  expect(logout.status).toBe(429);
  // Callers with a credential have their own budget.
  const keyed = await fetch(`${gateway.url}/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992`, {
    headers: { 'x-api-key': 'local-dev-key' },
  });
  expect(keyed.status).toBe(200);
});
