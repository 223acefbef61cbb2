// Writes a client registry file (the SPEC §4 format) for tests, from plain keys.
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestClient {
  readonly id: string;
  readonly keys: readonly string[];
  readonly scopes: readonly string[];
  readonly rateLimit?: { readonly limit: number; readonly windowSeconds: number };
  readonly origins?: readonly string[];
}

export const keyHash = (key: string) => `sha256:${createHash('sha256').update(key).digest('hex')}`;

export function registryJson(clients: readonly TestClient[]): string {
  return JSON.stringify({
    clients: clients.map((client) => ({ ...client, keys: client.keys.map(keyHash) })),
  });
}

/** Writes the registry to a fresh temp directory and returns the file's path. */
export function writeClientsFile(clients: readonly TestClient[]): string {
  const file = join(mkdtempSync(join(tmpdir(), 'bff-clients-')), 'clients.json');
  writeFileSync(file, registryJson(clients));
  return file;
}
