// The fleet's back-off seen from outside a replica: what a token manager recorded is read as it reads it, the wait
// is capped by the policy, another credential's refusal does not block, and a shared refusal continues the streak.
import { pino } from 'pino';
import { createMemoryTokenStore } from '../../../src/store/memory-token-store';
import { createFleetBackoffView } from '../../../src/tokens';
import { FakeClock, FakeCredentialSource, TEST_BASE_URL, testMetrics, testSeal } from './token-fakes';

const settings = { upstreamBaseUrl: TEST_BASE_URL, keyPrefix: 'view:', loginMinIntervalMs: 20_000 };

function views() {
  const clock = new FakeClock();
  const store = createMemoryTokenStore();
  const seal = testSeal(testMetrics(), Buffer.alloc(32, 7));
  const view = (password = 'secret') =>
    createFleetBackoffView({
      store,
      seal,
      credentials: new FakeCredentialSource('merchant', password).current(),
      logger: pino({ enabled: false }),
      settings,
      clock,
    });
  return { clock, view };
}

test('nothing recorded: clear, the fleet would log in', async () => {
  expect(await views().view().read()).toEqual({
    kind: 'clear',
    lastRefusal: undefined,
    otherCredentialsRefused: false,
  });
});

test('a shared refusal blocks every reader until its wait ends, then reads as the last refusal', async () => {
  const { clock, view } = views();
  const record = await view().shareRefusal('UPSTREAM_AUTH_FAILED');
  expect(record).toMatchObject({ reason: 'UPSTREAM_AUTH_FAILED', streak: 1 });
  const waitMs = record?.waitMs ?? 0;
  expect(waitMs).toBeGreaterThanOrEqual(20_000);
  expect(await view().read()).toMatchObject({ kind: 'backing-off', cause: 'refusal', remainingMs: waitMs });
  await clock.advance(5_000);
  expect(await view().read()).toMatchObject({ kind: 'backing-off', remainingMs: waitMs - 5_000 });
  await clock.advance(waitMs);
  expect(await view().read()).toMatchObject({ kind: 'clear', lastRefusal: { streak: 1 } });
});

test('the next refusal continues the fleet streak (the wait doubles), never restarts it', async () => {
  const { clock, view } = views();
  const first = await view().shareRefusal('UPSTREAM_IP_NOT_WHITELISTED');
  await clock.advance(first?.waitMs ?? 0);
  const second = await view().shareRefusal('UPSTREAM_IP_NOT_WHITELISTED');
  expect(second).toMatchObject({ streak: 2 });
  expect(second?.waitMs).toBeGreaterThanOrEqual(40_000);
});

test('a refusal of other credentials does not block these, and is reported as such', async () => {
  const { view } = views();
  await view('old-password').shareRefusal('UPSTREAM_AUTH_FAILED');
  expect(await view('new-password').read()).toMatchObject({ kind: 'clear', otherCredentialsRefused: true });
});
