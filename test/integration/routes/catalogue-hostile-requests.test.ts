// Hostile callers against the catalogue's seed operations (adversarial read of issue 39): odd path values, extra
// query strings and prototype keys in bodies are 4xx with the envelope or travel cleaned, never a 5xx.
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

const KEY = 'catalogue-hostile-key-0123456789';
const PASSWORD = 'catalogue-hostile-password';
const auth = { 'x-api-key': KEY };

let simulator: RunningSimulator;
let gw: TestGateway;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: 'catalogue-hostile', password: PASSWORD });
  const clientsFile = writeClientsFile([
    { id: 'catalogue-hostile-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
  ]);
  gw = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'catalogue-hostile',
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
  });
});

afterAll(async () => {
  await gw?.close();
  await simulator?.close();
});

beforeEach(() => simulator.reset());

async function call(path: string, init: RequestInit = {}) {
  const res = await fetch(gw.url + path, { ...init, headers: { ...auth, ...(init.headers ?? {}) } });
  return { status: res.status, text: await res.text() };
}

test.each([
  ['a malformed percent-encoding', '%E0%A4%A'],
  ['an encoded slash', '..%2F..%2Fadmin'],
  ['an encoded NUL', 'abc%00'],
  ['unicode', encodeURIComponent('ünïcødé-☃')],
  ['a very long value', 'a'.repeat(6000)],
  ['an encoded dot segment', '%2e%2e'],
])('a plan id with %s is a 4xx with the envelope and reaches no provider', async (_what, id) => {
  const answer = await call(`/api/subscriptions/plan/${id}`);
  expect(answer.status).toBeGreaterThanOrEqual(400);
  expect(answer.status).toBeLessThan(500);
  expect(JSON.parse(answer.text).status.code).toBe(String(answer.status));
  expect(simulator.receivedRequests()).toHaveLength(0);
});

test('a caller query string on the plan never reaches the provider', async () => {
  const answer = await call(
    '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992?debug=1&admin=true',
  );
  expect(answer.status).toBe(200);
  expect(simulator.receivedRequests().map((r) => r.query)).toEqual([{}]);
});

test('__proto__ and constructor keys in a validation body are stripped, not forwarded', async () => {
  const answer = await call('/api/validation/document', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"country":"ARG","document":{"id":"20-17254359-7","type":"CUIT","__proto__":{"x":1}},"__proto__":{"isAdmin":true},"constructor":{"prototype":{"y":1}}}',
  });
  expect(answer.status).toBe(200);
  const sent = simulator.receivedRequests();
  expect(sent).toHaveLength(1);
  const body = sent[0]!.body as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['country', 'document']);
  expect(Object.keys(body.document as object).sort()).toEqual(['id', 'type']);
});
