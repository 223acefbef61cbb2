// The operations catalogue at run time (SPEC §12) on two real gateway replicas sharing a real Redis, in front of the
// simulator: an operation added to OPERATIONS_FILE while load runs is served by both within seconds, with no failed
// request on the others; removed, it answers 404; an invalid document keeps the last good catalogue (logged, counted).
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { SEED_SUBSCRIPTION_ID } from '../../src/simulator/subscriptions';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type LoadRequest, runLoad } from '../support/load';
import { PLAN_ID } from '../support/ops-fixture';
import { waitFor } from '../support/ports';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import {
  SHIPPED_CATALOGUE as SHIPPED,
  catalogueWithSubscriptions as withSubscriptions,
} from '../support/subscription-operation';
import { tempDir } from '../support/temp-dir';

const KEY = 'catalogue-reload-key-0123456789abcdef';
let redis: RedisServer;
let simulator: RunningSimulator;
let gateways: GatewayProcess[] = [];
let operationsFile: string;

/** Replaces the file the way deploy tools do: write aside, rename over. */
function replaceFile(content: string): void {
  const next = `${operationsFile}.next`;
  writeFileSync(next, content);
  renameSync(next, operationsFile);
}

const get = async (gateway: GatewayProcess, path: string) => {
  const res = await fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': KEY } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
const subscriptionPath = `/api/subscriptions/${SEED_SUBSCRIPTION_ID}`;

async function metric(gateway: GatewayProcess, line: string): Promise<number> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return Number(found?.split(' ')[1] ?? 0);
}

beforeAll(async () => {
  [redis, simulator] = await Promise.all([startRedisServer(), startSimulator({ port: 0 })]);
  operationsFile = join(tempDir('bff-catalogue-'), 'operations.json');
  writeFileSync(operationsFile, SHIPPED);
  const env = {
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'sandbox-merchant',
    UPSTREAM_PASSWORD: 'sandbox-password',
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: `bff-catalogue-${Date.now()}:`,
    CLIENTS_FILE: writeClientsFile([
      { id: 'shop', keys: [KEY], scopes: ['plans:read', 'documents:validate'] },
    ]),
    OPERATIONS_FILE: operationsFile,
    RATE_LIMIT_DEFAULT_LIMIT: '1000000',
  };
  gateways = await Promise.all([startGatewayProcess({ env }), startGatewayProcess({ env })]);
}, 60_000);

afterAll(async () => {
  await Promise.all(gateways.map((gateway) => gateway.stop()));
  await Promise.all([redis?.stop(), simulator?.close()]);
});

test('an operation added while load runs is served by both replicas within seconds; removed, 404; no failed request', async () => {
  for (const gateway of gateways) expect((await get(gateway, subscriptionPath)).status).toBe(404);
  let stopLoad = () => {};
  const stop = new Promise<void>((resolve) => {
    stopLoad = resolve;
  });
  const load = runLoad({
    targets: gateways.map((gateway) => gateway.url),
    concurrency: 4,
    durationMs: 60_000,
    maxRequests: 20_000,
    stop,
    request: (n): LoadRequest =>
      n % 2 === 0
        ? { method: 'GET', path: `/api/subscriptions/plan/${PLAN_ID}`, headers: { 'x-api-key': KEY } }
        : {
            method: 'POST',
            path: '/api/validation/document',
            headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
            body: JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } }),
          },
  });
  try {
    replaceFile(withSubscriptions());
    for (const gateway of gateways)
      await waitFor(async () => (await get(gateway, subscriptionPath)).status === 200, {
        timeoutMs: 10_000,
        what: 'the added operation served',
      });
    for (const gateway of gateways) {
      const { body } = await get(gateway, subscriptionPath);
      // answer: strict by default: the provider's undocumented riskScore never reaches the caller.
      expect(body).toEqual({
        id: SEED_SUBSCRIPTION_ID,
        planId: PLAN_ID,
        status: 'ACTIVE',
        startedAt: '2026-01-15T12:00:00Z',
        nextChargeAt: '2026-12-15T12:00:00Z',
      });
      const spec = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as { paths: object };
      expect(Object.keys(spec.paths)).toContain('/api/subscriptions/{subscriptionId}');
    }
    replaceFile(SHIPPED);
    for (const gateway of gateways)
      await waitFor(async () => (await get(gateway, subscriptionPath)).status === 404, {
        timeoutMs: 10_000,
        what: 'the removed operation gone',
      });
  } finally {
    stopLoad();
  }
  const report = await load;
  // The others (plan reads, document validations) never failed while the catalogue changed under them.
  expect(report.sent).toBeGreaterThan(0);
  expect(report.summary).toBe(`200×${report.sent}`);
  expect([report.lost, report.malformed, report.refused]).toEqual([0, 0, 0]);
}, 60_000);

test('an invalid document keeps the last good catalogue on both replicas: logged and counted', async () => {
  const broken = JSON.parse(withSubscriptions());
  broken.paths['/api/subscriptions/{subscriptionId}'].get['x-gateway'] = { scopes: 'plans:read' };
  replaceFile(JSON.stringify(broken));
  for (const gateway of gateways)
    await waitFor(
      async () =>
        (await metric(gateway, 'operations_catalogue_reload_failures_total{reason="invalid"}')) === 1,
      { timeoutMs: 10_000, what: 'the refused reload counted' },
    );
  for (const gateway of gateways) {
    expect((await get(gateway, `/api/subscriptions/plan/${PLAN_ID}`)).status).toBe(200);
    expect((await get(gateway, subscriptionPath)).status).toBe(404);
    expect(gateway.logs()).toContain('x-gateway has an unknown field \\"scopes\\"');
  }
  replaceFile(SHIPPED);
}, 30_000);
