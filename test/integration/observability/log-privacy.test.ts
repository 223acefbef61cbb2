// No personal data in logs: documents with distinctive digits go through every path of a running gateway (upstream
// mode against the simulator, and local mode with the embedded simulator), at trace level; no log line may carry
// any four consecutive digits of a document id. The request line names a document by its keyed reference only.
import { randomBytes } from 'node:crypto';
import { createDocumentReference } from '../../../src/observability/document-reference';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';

const KEY = 'log-privacy-key-abcdefghij';
const PASSWORD = 'log-privacy-upstream-password';
const ENCRYPTION_KEY = randomBytes(32);
const expectedReference = createDocumentReference(ENCRYPTION_KEY);

/** Candidate ids: distinctive digits, no run that a timestamp's year could produce. */
const CANDIDATES = [
  '27-38492716-5',
  '30-71593846-9',
  '23-94817352-4',
  '859.367.149-83',
  '83.594.617/2938-45',
  '57 39 84 61 93',
  '69.315.784-K',
  '4718395627',
  '39581746',
  '96-47158392-3',
  '75.839.461/7593-18',
  '68431957',
];

/** Every run of 4 consecutive digits of an id, separators removed and kept. */
function digitRuns(id: string): string[] {
  const runs = new Set<string>();
  for (const text of [id.replace(/\D/g, ''), ...id.split(/\D+/)])
    for (let i = 0; i + 4 <= text.length; i++) runs.add(text.slice(i, i + 4));
  return [...runs];
}

/** The candidates none of whose digit runs already occur in the logs (a port number, say). */
function idsAbsentFrom(logs: string, count: number): string[] {
  const ids = CANDIDATES.filter(
    (id) => !digitRuns(id).some((run) => logs.includes(run)) && !digitRuns(id).includes('2026'),
  );
  expect(ids.length).toBeGreaterThanOrEqual(count);
  return ids.slice(0, count);
}

async function validate(
  base: string,
  key: string,
  country: string,
  id: string,
  type = 'CUIT',
  requestId = 'log-privacy-request',
) {
  const res = await fetch(`${base}/api/validation/document`, {
    method: 'POST',
    // A request id without digits: a random one could hold a run of an id by chance.
    headers: { 'content-type': 'application/json', 'x-api-key': key, 'x-request-id': requestId },
    body: JSON.stringify({ country, document: { id, type } }),
  });
  await res.arrayBuffer();
  return res.status;
}

/**
 * Every line, parsed. A request line's document reference must be exactly the keyed HMAC of one of the ids sent
 * (so it carries nothing else) and is then set aside; nothing else in any line may hold a digit run of an id.
 */
function expectNoDigitsOfIds(logs: string, ids: readonly string[]) {
  const references = new Set(ids.map(expectedReference));
  const lines = logs.split('\n').filter(Boolean);
  let referenced = 0;
  for (const line of lines) {
    const entry = JSON.parse(line) as { document?: { ref?: string; id?: unknown } };
    let rest = line;
    if (entry.document) {
      expect(entry.document.id).toBeUndefined();
      expect(references.has(entry.document.ref as string)).toBe(true);
      rest = line.replace(entry.document.ref as string, '<ref>');
      referenced += 1;
    }
    for (const id of ids)
      for (const run of digitRuns(id))
        if (rest.includes(run)) throw new Error(`log line holds "${run}" of a document id: ${line}`);
  }
  return { lines: lines.length, referenced };
}

describe('upstream mode: every path of a validation request', () => {
  let simulator: RunningSimulator;
  let gw: TestGateway;

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: 'log-merchant', password: PASSWORD });
    gw = await startTestGateway({
      UPSTREAM_BASE_URL: simulator.url,
      UPSTREAM_ALLOW_HTTP: 'true',
      UPSTREAM_USERNAME: 'log-merchant',
      UPSTREAM_PASSWORD: PASSWORD,
      TOKEN_ENCRYPTION_KEY: ENCRYPTION_KEY.toString('base64'),
      CLIENTS_FILE: writeClientsFile([{ id: 'log-app', keys: [KEY], scopes: ['documents:validate'] }]),
      LOG_LEVEL: 'trace',
      UPSTREAM_TIMEOUT_MS: '300',
      CIRCUIT_MINIMUM_CALLS: '4',
      CIRCUIT_RESET_MS: '60000',
    });
  });

  afterAll(async () => {
    await gw?.close();
    await simulator?.close();
  });

  test('forwarded, refused, failed, timed out and circuit-broken documents leave no digit of their ids', async () => {
    const [valid, invalid, refused, lookalike, poison, slow, broken] = idsAbsentFrom(
      gw.logs(),
      7,
    ) as string[];
    const ids = [valid, invalid, refused, lookalike, poison, slow, broken] as string[];
    // Forwarded: the provider's verdict, valid or not (same id twice: the same reference).
    expect(await validate(gw.url, KEY, 'ARG', valid as string)).toBe(200);
    expect(await validate(gw.url, KEY, 'ARG', valid as string)).toBe(200);
    expect(await validate(gw.url, KEY, 'BRA', invalid as string, 'CPF')).toBe(200);
    // Refused locally: a country typo, a full-width digit, broken JSON holding the id.
    expect(await validate(gw.url, KEY, 'ARQ', refused as string)).toBe(400);
    expect(await validate(gw.url, KEY, 'ARG', `${lookalike}\uff17`)).toBe(400);
    const brokenJson = await fetch(`${gw.url}/api/validation/document`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY, 'x-request-id': 'log-privacy-broken' },
      body: `{"country":"ARG","document":{"id":"${broken}",`,
    });
    expect(brokenJson.status).toBe(400);
    // Unauthenticated: refused before the body is read.
    expect(await validate(gw.url, 'not-a-key', 'ARG', valid as string)).toBe(401);
    // The provider fails on one id (502), is too slow for another (504), then the circuit opens (503).
    simulator.setFaults({ failIds: [poison as string], errorStatus: 500 });
    expect(await validate(gw.url, KEY, 'ARG', poison as string)).toBe(502);
    simulator.setFaults({ latencyMs: 1_000 });
    // The window then holds 3 answers and 1 failure: the third timeout makes 4 failures of 7, above one half.
    for (let i = 0; i < 3; i++) expect(await validate(gw.url, KEY, 'ARG', slow as string)).toBe(504);
    expect(await validate(gw.url, KEY, 'ARG', slow as string)).toBe(503);
    simulator.setFaults({});
    await gw.gateway.shutdown();

    const logs = gw.logs();
    expect(logs).toContain('"circuit":"open"');
    expect(logs).toContain('"status":504');
    const { referenced } = expectNoDigitsOfIds(logs, ids);
    // Every validation that passed the schema is named by reference: 3 forwarded + 1 poison + 4 slow/open.
    expect(referenced).toBe(8);
    // The same id always gives the same reference.
    expect(logs.split(expectedReference(valid as string)).length - 1).toBe(2);
  });
});

describe('local mode: the embedded simulator logs no document either', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await startTestGateway({
      LOG_LEVEL: 'trace',
      TOKEN_ENCRYPTION_KEY: ENCRYPTION_KEY.toString('base64'),
    });
  });

  afterAll(async () => {
    await gw?.close();
  });

  test('documents through the bundled simulator leave no digit of their ids', async () => {
    const ids = idsAbsentFrom(gw.logs(), 4);
    for (const id of ids) expect(await validate(gw.url, 'local-dev-key', 'ARG', id)).toBe(200);
    expect(await validate(gw.url, 'local-dev-key', 'ARQ', ids[0] as string)).toBe(400);
    await gw.gateway.shutdown();
    expect(expectNoDigitsOfIds(gw.logs(), ids).referenced).toBe(4);
  });
});
