import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../../src/config/load-config';
import { catalogueStep } from '../../../src/operations/doctor-catalogue';
import { tempDir } from '../../support/temp-dir';

describe('the doctor on OPERATIONS_FILE', () => {
  test('passes on the shipped catalogue, naming what it serves', () => {
    const step = catalogueStep(loadConfig({}));
    expect(step.state).toBe('pass');
    expect(step.detail).toContain('validation (POST /api/validation/document)');
    expect(step.detail).toContain('plan (GET /api/subscriptions/plan/{internalId})');
  });

  test('fails on an invalid document, naming the operation and the field', () => {
    const file = join(tempDir('bff-doctor-catalogue-'), 'operations.json');
    writeFileSync(
      file,
      JSON.stringify({
        openapi: '3.1.0',
        info: { title: 't', version: '1' },
        paths: {
          '/x': { get: { operationId: 'x', 'x-gateway': { scope: 'a', answr: 'strict' }, responses: {} } },
        },
      }),
    );
    const step = catalogueStep(loadConfig({ OPERATIONS_FILE: file }));
    expect(step).toMatchObject({ state: 'fail', fix: expect.stringContaining('docs/catalogue.md') });
    expect(step.detail).toContain('GET /x (x): x-gateway has an unknown field "answr"');
  });
});
