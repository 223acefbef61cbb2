// A client generated from the gateway's served /openapi.json by a mainstream generator (openapi-typescript types,
// openapi-fetch calls) compiles, and reads through those types a plan, a verdict, a gateway 400 with its errors, a
// 429 with Retry-After and the provider's own error passed through. A document that breaks the types fails the compile.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { writeClientsFile } from '../../support/clients-file';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { tempDir } from '../../support/temp-dir';

jest.setTimeout(120_000);

const ROOT = resolve(__dirname, '../../..');
const CLIENT_DIR = join(ROOT, 'test/support/typed-client');
const GENERATED = join(CLIENT_DIR, 'generated/gateway-api.d.ts');
const PLAN = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const KEY = 'typed-client-key-0123456789';
const LIMITED_KEY = 'typed-client-limited-012345';

/** openapi-typescript's CLI, on the project's Node, from a document to the generated types. */
function generateTypes(document: object, output: string): void {
  const input = join(tempDir('openapi-client-'), 'openapi.json');
  writeFileSync(input, JSON.stringify(document));
  mkdirSync(join(output, '..'), { recursive: true });
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'), input, '-o', output],
    {
      stdio: 'pipe',
    },
  );
}

/** tsc over the client and the generated types: its output, and whether it compiled. */
function compileClient(): { ok: boolean; output: string } {
  try {
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', CLIENT_DIR], {
      stdio: 'pipe',
    });
    return { ok: true, output: '' };
  } catch (error) {
    const { stdout, stderr } = error as { stdout: Buffer; stderr: Buffer };
    return { ok: false, output: `${stdout}${stderr}` };
  }
}

interface TypedClient {
  readPlan(internalId: string): Promise<unknown>;
  validate(body: unknown): Promise<unknown>;
}

/**
 * The client, loaded at run time: a static import would make `npm run typecheck` follow it into ./generated, which
 * only this test creates. Its own compile is the `tsc -p test/support/typed-client` above.
 */
function gatewayClient(baseUrl: string, apiKey: string): TypedClient {
  const module = require(join(CLIENT_DIR, 'client')) as {
    gatewayClient(baseUrl: string, apiKey: string): TypedClient;
  };
  return module.gatewayClient(baseUrl, apiKey);
}

let simulator: RunningSimulator;
let gateway: TestGateway;
let document: Record<string, any>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: 'typed-merchant', password: 'typed-password' });
  gateway = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'typed-merchant',
    UPSTREAM_PASSWORD: 'typed-password',
    CLIENTS_FILE: writeClientsFile([
      { id: 'typed-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
      {
        id: 'typed-limited',
        keys: [LIMITED_KEY],
        scopes: ['plans:read'],
        rateLimit: { limit: 1, windowSeconds: 60 },
      },
    ]),
  });
  document = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as Record<string, any>;
  generateTypes(document, GENERATED);
});

afterAll(async () => {
  await gateway?.close();
  await simulator?.close();
});

describe('a client generated from /openapi.json', () => {
  it('compiles against the types generated from the served document', () => {
    const { ok, output } = compileClient();
    expect(output).toBe('');
    expect(ok).toBe(true);
  });

  it('fails to compile when the document stops describing what the client reads', () => {
    const broken = structuredClone(document);
    delete broken.components.schemas.SubscriptionPlan.properties.amount;
    broken.components.schemas.SubscriptionPlan.required =
      broken.components.schemas.SubscriptionPlan.required.filter((name: string) => name !== 'amount');
    for (const item of Object.values<any>(broken.paths))
      for (const operation of Object.values<any>(item))
        delete operation.responses?.['429']?.headers?.['Retry-After'];
    try {
      generateTypes(broken, GENERATED);
      const { ok, output } = compileClient();
      expect(ok).toBe(false);
      expect(output).toMatch(/amount/);
      // The Retry-After read: an undeclared header is `never` to the client.
      expect(output).toMatch(/Type 'string' is not assignable to type 'never'/);
    } finally {
      generateTypes(document, GENERATED);
    }
  });

  it('reads a plan, a verdict, a gateway 400 with its errors, a 429 with Retry-After and a provider error', async () => {
    const client = gatewayClient(gateway.url, KEY);
    expect(await client.readPlan(PLAN.toUpperCase())).toEqual({
      kind: 'plan',
      name: 'Premium monthly',
      amount: expect.any(Number),
      everyHours: expect.any(Number),
    });
    expect(
      await client.validate({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } }),
    ).toEqual({
      valid: true,
      description: 'Valid id and type document',
    });
    expect(
      await client.validate({ country: 'ARQ', document: { id: '20-17254359-7', type: 'CUIT' } }),
    ).toEqual({
      kind: 'gateway-error',
      status: 400,
      reason: 'INVALID_REQUEST',
      requestId: expect.any(String),
      fields: [expect.stringMatching(/^country: /)],
    });
    expect(await client.readPlan('00000000-0000-4000-8000-000000000000')).toEqual({
      kind: 'provider-error',
      status: 404,
      detail: 'Plan subscription not found',
    });

    const limited = gatewayClient(gateway.url, LIMITED_KEY);
    expect(await limited.readPlan(PLAN)).toMatchObject({ kind: 'plan' });
    expect(await limited.readPlan(PLAN)).toEqual({
      kind: 'rate-limited',
      retryAfter: expect.stringMatching(/^\d+$/),
      reason: 'RATE_LIMITED',
    });
    simulator.setFaults({ errorStatus: 429, retryAfterSeconds: 9, failIds: [PLAN] });
    try {
      expect(await client.readPlan(PLAN)).toEqual({ kind: 'rate-limited', retryAfter: '9', reason: 'ERROR' });
    } finally {
      simulator.setFaults({});
    }
  });
});
