// The simulator's own count of what it answered (GET /__simulator/answers): each operation answer with the account
// whose token it carried, the X-Request-Id and the status; what a usage reconciliation compares the ledger with.
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const UNKNOWN_PLAN = '/api/subscriptions/plan/00000000-0000-4000-8000-000000000000';

describe('simulator answer log', () => {
  let simulator: RunningSimulator;

  beforeAll(async () => {
    simulator = await startSimulator({
      port: 0,
      username: 'merchant-a',
      password: 'password-a',
      extraAccounts: [{ username: 'merchant-b', password: 'password-b' }],
    });
  });
  afterAll(() => simulator.close());

  const accessOf = async (username: string, password: string) =>
    (
      (await (
        await fetch(`${simulator.url}/api/token/`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username, password }),
        })
      ).json()) as { access: string }
    ).access;

  test('records account, request id and status of each operation answer; token calls and cut connections are not answers', async () => {
    const a = await accessOf('merchant-a', 'password-a');
    const b = await accessOf('merchant-b', 'password-b');
    const get = (path: string, token: string, id: string) =>
      fetch(simulator.url + path, { headers: { authorization: `Bearer ${token}`, 'x-request-id': id } });
    await get(PLAN, a, 'r-1');
    await get(UNKNOWN_PLAN, b, 'r-2');
    simulator.revokeTokens();
    await get(PLAN, a, 'r-3');
    simulator.setFaults({ resetConnections: true });
    await get(PLAN, b, 'r-4').catch(() => undefined);
    simulator.setFaults({ failIds: ['20-17254359-7'], errorStatus: 503 });
    await fetch(`${simulator.url}/api/validation/document`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${b}`, 'x-request-id': 'r-5' },
      body: JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } }),
    });
    const answers = (await (await fetch(`${simulator.url}/__simulator/answers`)).json()) as unknown[];
    expect(answers).toEqual([
      { operation: 'plan', account: 'merchant-a', requestId: 'r-1', status: 200 },
      { operation: 'plan', account: 'merchant-b', requestId: 'r-2', status: 404 },
      { operation: 'plan', account: 'merchant-a', requestId: 'r-3', status: 401 },
      { operation: 'validation', account: 'merchant-b', requestId: 'r-5', status: 503 },
    ]);
    simulator.reset();
    expect(simulator.answers()).toEqual([]);
  });
});
