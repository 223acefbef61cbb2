import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadClientRegistry } from '../../../src/callers/client-registry';
import { registryJsonSchema } from '../../../src/callers/registry-schema';
import { memoryLogger } from './support/test-app';

const config = (name: string) => join(__dirname, '../../../config', name);

describe('the checked-in registry files', () => {
  test('config/clients.schema.json is the JSON Schema of the registry schema', () => {
    const onDisk = JSON.parse(readFileSync(config('clients.schema.json'), 'utf8'));
    expect(onDisk).toEqual(registryJsonSchema());
  });

  test('the local development registry accepts local-dev-key with both scopes', () => {
    const registry = loadClientRegistry(config('clients.local.json'), {
      logger: memoryLogger(),
      watch: false,
    });
    const caller = registry.findByApiKey('local-dev-key');
    expect(caller?.id).toBe('local-dev');
    expect([...(caller?.scopes ?? [])].sort()).toEqual(['documents:validate', 'plans:read']);
    expect(readFileSync(config('clients.local.json'), 'utf8')).not.toContain('local-dev-key');
  });

  test('the example registry is valid and lists two clients, one with origins', () => {
    const registry = loadClientRegistry(config('clients.example.json'), {
      logger: memoryLogger(),
      watch: false,
    });
    expect(registry.size).toBe(2);
    expect([...registry.allOrigins()]).toEqual(['https://checkout.internal.example']);
  });
});
