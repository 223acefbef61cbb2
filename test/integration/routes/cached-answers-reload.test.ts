// A cached read answer and a catalogue reload that changes what the answer may carry (answer: strict): the answer
// kept under the old schema is never served again. The real gateway in this process, the simulator as its provider
// over real HTTP, the catalogue file rewritten the way deploy tools do (write aside, rename over).
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { SEED_SUBSCRIPTION_ID } from '../../../src/simulator/subscriptions';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { waitFor } from '../../support/ports';
import { SHIPPED_CATALOGUE, SUBSCRIPTION_OPERATION } from '../../support/subscription-operation';
import { tempDir } from '../../support/temp-dir';

jest.setTimeout(30_000);

const KEY = 'cached-answers-reload-key-0123456789';
const PATH = `/api/subscriptions/${SEED_SUBSCRIPTION_ID}`;

let simulator: RunningSimulator;
let gateway: TestGateway;
let operationsFile: string;

/** The shipped catalogue plus the subscription read, cached a minute, its 200 schema given extra properties. */
function catalogue(extraProperties: Record<string, unknown>): string {
  const document = JSON.parse(SHIPPED_CATALOGUE);
  const operation = structuredClone(SUBSCRIPTION_OPERATION) as Record<string, any>;
  operation['x-gateway'] = { ...operation['x-gateway'], cache: { ttlSeconds: 60 } };
  const schema = operation.responses['200'].content['application/json'].schema;
  schema.properties = { ...schema.properties, ...extraProperties };
  document.paths['/api/subscriptions/{subscriptionId}'] = { get: operation };
  return JSON.stringify(document, null, 2);
}

function replaceFile(content: string): void {
  writeFileSync(`${operationsFile}.next`, content);
  renameSync(`${operationsFile}.next`, operationsFile);
}

/** Catalogue reloads the gateway has logged so far. */
const reloads = () => gateway.logs().split('operations catalogue reloaded').length - 1;

/** The subscription reads the provider has served so far. */
const providerReads = () => simulator.receivedRequests().filter((r) => r.path === PATH).length;

const read = async () => {
  const res = await fetch(`${gateway.url}${PATH}`, { headers: { 'x-api-key': KEY } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

beforeAll(async () => {
  simulator = await startSimulator({ port: 0 });
  operationsFile = join(tempDir('cached-answers-reload-'), 'operations.json');
  writeFileSync(operationsFile, catalogue({ riskScore: { type: 'number' } }));
  gateway = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'sandbox-merchant',
    UPSTREAM_PASSWORD: 'sandbox-password',
    CLIENTS_FILE: writeClientsFile([{ id: 'shop', keys: [KEY], scopes: ['plans:read'] }]),
    OPERATIONS_FILE: operationsFile,
  });
});

afterAll(async () => {
  await gateway?.close();
  await simulator?.close();
});

test('an answer cached under a schema that declared riskScore is not served once a reload drops riskScore', async () => {
  const first = await read();
  expect(first.status).toBe(200);
  expect(first.body.riskScore).toBe(0.12); // declared: kept, and cached with it
  const callsBefore = providerReads();
  expect((await read()).body.riskScore).toBe(0.12);
  expect(providerReads()).toBe(callsBefore); // the second read came from the cache

  replaceFile(catalogue({}));
  await waitFor(async () => !('riskScore' in (await read()).body), {
    timeoutMs: 10_000,
    what: 'the reloaded schema applied to the cached read',
  });
  // Read again from the provider and filtered by the new schema; then cached under it.
  const after = await read();
  expect(after.status).toBe(200);
  expect(after.body).not.toHaveProperty('riskScore');
  expect(after.body.id).toBe(SEED_SUBSCRIPTION_ID);
  expect(providerReads()).toBe(callsBefore + 1);
});

test('a reload that leaves the answer schema as it was keeps the cached answers', async () => {
  const before = await read();
  const callsBefore = providerReads();
  const reloadsBefore = reloads();
  // The same operation, another summary: the answer version is that of the schemas, not of the document.
  const document = JSON.parse(catalogue({}));
  document.paths['/api/subscriptions/{subscriptionId}'].get.summary = 'Read one subscription.';
  replaceFile(JSON.stringify(document, null, 2));
  await waitFor(() => reloads() === reloadsBefore + 1, { timeoutMs: 10_000, what: 'the reload' });
  expect((await read()).body).toEqual(before.body);
  expect(providerReads()).toBe(callsBefore);
});
