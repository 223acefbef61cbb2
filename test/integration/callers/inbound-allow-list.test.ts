// A flood from an address outside INBOUND_ALLOW_CIDRS against the real gateway: every request refused 403 before
// anything else, and logged in aggregate like failed authentications, never one line per request.
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const FLOOD = 40;

let simulator: RunningSimulator;
let gw: TestGateway;

interface LogLine {
  msg: string;
  status?: number;
  clientIp?: string;
  outsideAllowList?: number;
}

const logLines = (): LogLine[] =>
  gw
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: 'cidr-merchant', password: 'cidr-password' });
  gw = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'cidr-merchant',
    UPSTREAM_PASSWORD: 'cidr-password',
    // The test calls from 127.0.0.1, outside this list.
    INBOUND_ALLOW_CIDRS: '10.0.0.0/8',
    CLIENTS_FILE: writeClientsFile([
      { id: 'cidr-app', keys: ['cidr-key-0123456789'], scopes: ['plans:read'] },
    ]),
  });
});

afterAll(async () => {
  await gw?.close();
  await simulator?.close();
});

test('a flood from outside the allow-list: 403 each, one aggregated log line for the address', async () => {
  const linesBefore = logLines().length;
  for (let i = 0; i < FLOOD; i++) {
    const res = await fetch(gw.url + PLAN, { headers: { 'x-api-key': 'cidr-key-0123456789' } });
    await res.arrayBuffer();
    expect(res.status).toBe(403);
  }
  expect(simulator.stats().requests).toBe(0);
  // Nothing per request: the flood is not a flood of log lines.
  expect(logLines().slice(linesBefore)).toEqual([]);

  await gw.close();
  const aggregated = logLines().filter((line) => line.outsideAllowList !== undefined);
  expect(aggregated).toEqual([expect.objectContaining({ clientIp: '127.0.0.1', outsideAllowList: FLOOD })]);
});
