import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { createCatalogueSource } from '../../../src/catalogue';
import { SHIPPED_CATALOGUE } from '../../support/subscription-operation';
import { tempDir } from '../../support/temp-dir';

const logger = pino({ level: 'silent' });

function withOperation(id: string): string {
  const document = JSON.parse(SHIPPED_CATALOGUE);
  document.paths[`/api/${id}/{x}`] = {
    get: {
      operationId: id,
      'x-gateway': { scope: 'plans:read' },
      parameters: [{ name: 'x', in: 'path', required: true, schema: { type: 'string' } }],
      responses: { '200': { description: 'ok' } },
    },
  };
  return JSON.stringify(document);
}

describe('the running catalogue (reload on SIGHUP)', () => {
  test('a valid document replaces the catalogue whole; an invalid one keeps the last good, counted once', () => {
    const file = join(tempDir('bff-catalogue-source-'), 'operations.json');
    writeFileSync(file, SHIPPED_CATALOGUE);
    const refused: string[] = [];
    const source = createCatalogueSource(file, {
      logger,
      maxTimeoutMs: 10_000,
      refused: { inc: ({ reason }) => refused.push(reason) },
    });
    const seen: string[][] = [];
    source.onChange((catalogue) => seen.push(catalogue.operations.map((op) => op.id)));
    expect(source.operationIds()).toEqual(['validation', 'plan']);

    writeFileSync(file, withOperation('extra'));
    expect(source.reload()).toBe(true);
    expect(source.operationIds()).toEqual(['validation', 'plan', 'extra']);

    writeFileSync(file, '{"openapi": "3.1.0", "paths": ');
    expect(source.reload()).toBe(false);
    expect(source.reload()).toBe(false);
    expect(source.operationIds()).toEqual(['validation', 'plan', 'extra']);
    expect(refused).toEqual(['invalid']);

    writeFileSync(file, SHIPPED_CATALOGUE);
    expect(source.reload()).toBe(true);
    expect(seen).toEqual([
      ['validation', 'plan', 'extra'],
      ['validation', 'plan'],
    ]);
    // The ledger still counts the last requests of an operation removed meanwhile.
    expect(source.served.has('extra')).toBe(true);
    expect(source.served.has('never')).toBe(false);
    source.close();
  });

  test('a bad document at start is an error naming the problem', () => {
    const file = join(tempDir('bff-catalogue-source-'), 'operations.yaml');
    writeFileSync(file, 'openapi: 3.1.0\npaths: [\n');
    expect(() => createCatalogueSource(file, { logger, maxTimeoutMs: 10_000 })).toThrow(/is not valid YAML/);
  });
});
