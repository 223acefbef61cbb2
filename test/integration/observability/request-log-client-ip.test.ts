// The request log's client IP on forwarded requests: the caller's, as Express works it out from the caller's own
// headers under TRUST_PROXY, never the address the forwarder's replacement headers would give, and never a forged one.
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

const KEY = 'client-ip-log-key-0123456789';
const PASSWORD = 'client-ip-log-upstream-password';
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const BODY = JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } });

let simulator: RunningSimulator;
let clientsFile: string;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: 'client-ip-merchant', password: PASSWORD });
  clientsFile = writeClientsFile([
    { id: 'client-ip-client', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
  ]);
});
afterAll(async () => {
  await simulator?.close();
});

function gatewayWith(trustProxy: string): Promise<TestGateway> {
  return startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'client-ip-merchant',
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
    TRUST_PROXY: trustProxy,
  });
}

/** One POST and one plan GET from behind a proxy that says the caller is `forwardedFor`. */
async function forwardedCalls(gw: TestGateway, forwardedFor: string): Promise<void> {
  const headers = { 'x-api-key': KEY, 'x-forwarded-for': forwardedFor };
  const post = await fetch(`${gw.url}/api/validation/document`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', 'x-request-id': 'client-ip-post' },
    body: BODY,
  });
  const get = await fetch(`${gw.url}/api/subscriptions/plan/${PLAN_ID}`, {
    headers: { ...headers, 'x-request-id': 'client-ip-get' },
  });
  expect([post.status, get.status]).toEqual([200, 200]);
  await Promise.all([post.text(), get.text()]);
}

async function requestLines(gw: TestGateway): Promise<Array<Record<string, unknown>>> {
  // The line is written when the answer closes, just after the caller has read it.
  for (let i = 0; i < 50; i++) {
    const lines = gw
      .logs()
      .split('\n')
      .filter((line) => line.includes('"msg":"request"'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    if (lines.length >= 2) return lines;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`no request lines in:\n${gw.logs()}`);
}

describe('client IP of a forwarded request in the request log', () => {
  test('behind a trusted proxy (TRUST_PROXY=1) it is the caller the proxy names, for POST and GET alike', async () => {
    const gw = await gatewayWith('1');
    try {
      await forwardedCalls(gw, '203.0.113.9');
      const lines = await requestLines(gw);
      expect(lines.map((line) => [line.requestId, line.status, line.clientIp])).toEqual([
        ['client-ip-post', 200, '203.0.113.9'],
        ['client-ip-get', 200, '203.0.113.9'],
      ]);
    } finally {
      await gw.close();
    }
  });

  test('with no trusted proxy a forged X-Forwarded-For is ignored: the socket address is logged', async () => {
    const gw = await gatewayWith('false');
    try {
      await forwardedCalls(gw, '198.51.100.66');
      const lines = await requestLines(gw);
      expect(lines.map((line) => line.clientIp)).toEqual(['127.0.0.1', '127.0.0.1']);
    } finally {
      await gw.close();
    }
  });
});
