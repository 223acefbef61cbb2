// The doctor's login probe leaves from the account's localAddress: answered from the allowed loopback alias,
// refused 403 from another (the simulator's IP allow-list), and an address the host does not hold is named.

import { diagnoseToken } from '../../../src/operations/doctor';
import { requestUpstreamToken } from '../../../src/operations/doctor-checks';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { PASSWORD, USERNAME } from '../../support/ops-fixture';

let simulator: RunningSimulator;

beforeAll(async () => {
  simulator = await startSimulator({
    port: 0,
    username: USERNAME,
    password: PASSWORD,
    allowedIps: ['127.0.0.2'],
  });
});
afterAll(() => simulator?.close());

const probe = (localAddress: string) =>
  requestUpstreamToken(
    { baseUrl: simulator.url, username: USERNAME, password: PASSWORD },
    { timeoutMs: 3_000, localAddress },
  );

test('from the allowed address: a token pair, and the socket left from that address', async () => {
  const attempt = await probe('127.0.0.2');
  expect(attempt).toMatchObject({
    kind: 'answer',
    status: 200,
    tokenIssued: true,
    localAddress: '127.0.0.2',
  });
  expect(simulator.receivedTokenRequests().at(-1)?.remoteAddress).toBe('127.0.0.2');
});

test('from another address: 403, diagnosed with the account and its localAddress', async () => {
  const attempt = await probe('127.0.0.3');
  expect(attempt).toMatchObject({ kind: 'answer', status: 403, localAddress: '127.0.0.3' });
  const step = diagnoseToken(attempt, { id: 'production-ar', localAddress: '127.0.0.3' });
  expect(step.detail).toContain(
    'the provider refused account production-ar, sent from 127.0.0.3 (its localAddress)',
  );
});

test('an address the host does not hold: EADDRNOTAVAIL, named', async () => {
  const attempt = await probe('192.0.2.10');
  expect(attempt).toMatchObject({ kind: 'error', code: 'EADDRNOTAVAIL' });
  expect(diagnoseToken(attempt, { id: 'sandbox', localAddress: '192.0.2.10' }).detail).toContain(
    'this host does not hold 192.0.2.10, the localAddress of account sandbox',
  );
});
