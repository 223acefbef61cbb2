import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { parseCatalogue } from '../../../src/catalogue';
import { runOperationsCli } from '../../../src/catalogue/operations-cli';
import { runToExit } from '../../support/run-to-exit';
import { tempDir } from '../../support/temp-dir';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) }, out, err };
}

/** A provider's own document, OpenAPI 3.0 in YAML: its auth, a nullable field, an unnamed operation. */
const PROVIDER = {
  openapi: '3.0.3',
  info: { title: 'Payment Service API', version: '3' },
  servers: [{ url: 'https://provider.example' }],
  security: [{ bearer: [] }],
  paths: {
    '/api/subscriptions/{id}': {
      get: {
        operationId: 'getSubscription',
        security: [{ bearer: [] }],
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': {
            description: 'ok',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Subscription' } } },
          },
        },
      },
      delete: {
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { '204': { description: 'cancelled' } },
      },
    },
  },
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    schemas: {
      Subscription: {
        type: 'object',
        properties: { id: { type: 'string' }, nextChargeAt: { type: 'string', nullable: true } },
      },
    },
  },
};

describe('npm run operations -- import', () => {
  test('writes a draft of every operation, none with a scope, that loads and serves nothing', () => {
    const dir = tempDir('bff-operations-import-');
    const input = join(dir, 'provider.yaml');
    const output = join(dir, 'draft.json');
    writeFileSync(input, stringify(PROVIDER));
    const { io, err } = capture();
    expect(runOperationsCli(['import', input, '--out', output], {}, io)).toBe(0);
    expect(err.join('\n')).toContain('2 operations imported without a scope');
    const text = readFileSync(output, 'utf8');
    const catalogue = parseCatalogue(text, 'json', { maxTimeoutMs: 10_000 });
    expect(catalogue.operations).toEqual([]);
    expect(catalogue.unserved).toEqual([
      'GET /api/subscriptions/{id} (getSubscription)',
      'DELETE /api/subscriptions/{id} (deleteApiSubscriptionsId)',
    ]);
    const draft = JSON.parse(text);
    expect(draft.openapi).toBe('3.1.0');
    expect(draft.components.securitySchemes).toBeUndefined();
    expect(draft.paths['/api/subscriptions/{id}'].get.security).toBeUndefined();
    expect(draft.paths['/api/subscriptions/{id}'].get['x-gateway']).toEqual({});
    expect(draft.components.schemas.Subscription.properties.nextChargeAt).toEqual({
      type: ['string', 'null'],
    });
  });

  test('refuses what is not an OpenAPI 3 document', () => {
    const file = join(tempDir('bff-operations-import-'), 'bad.json');
    writeFileSync(file, JSON.stringify({ swagger: '2.0' }));
    const { io, err } = capture();
    expect(runOperationsCli(['import', file], {}, io)).toBe(1);
    expect(err.join()).toContain('must be OpenAPI 3.0 or 3.1');
    expect(runOperationsCli(['import'], {}, io)).toBe(2);
  });
});

describe('npm run operations -- list', () => {
  test('prints what the configured catalogue serves', async () => {
    const { code, output } = await runToExit('src/catalogue/operations-cli.ts', {}, ['list']);
    expect(code).toBe(0);
    expect(output).toMatch(
      /POST\s+\/api\/validation\/document\s+validation\s+documents:validate\s+-\s+optional/,
    );
    expect(output).toMatch(/GET\s+\/api\/subscriptions\/plan\/\{internalId\}\s+plan\s+plans:read\s+-\s+none/);
  });

  test('fails naming the problem of an invalid OPERATIONS_FILE', () => {
    const file = join(tempDir('bff-operations-list-'), 'operations.json');
    writeFileSync(file, '{"openapi":');
    const { io, err } = capture();
    expect(runOperationsCli(['list'], { OPERATIONS_FILE: file }, io)).toBe(1);
    expect(err.join()).toContain('is not valid JSON');
  });
});
