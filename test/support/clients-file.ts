// Writes a client registry file (the registry format) for tests, from plain keys.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Hex } from '../../src/keys/hash';
import { tempDir } from './temp-dir';

export interface TestClient {
  readonly id: string;
  readonly keys: readonly string[];
  readonly scopes: readonly string[];
  readonly rateLimit?: { readonly limit: number; readonly windowSeconds: number };
  readonly origins?: readonly string[];
  /** Provider accounts the client may use, its default first. */
  readonly accounts?: readonly string[];
  /** Billable provider calls per calendar day/month in `timezone` (SPEC §11). */
  readonly quota?: { readonly day?: number; readonly month?: number; readonly timezone?: string };
  readonly priority?: 'critical' | 'standard' | 'sheddable';
}

export const keyHash = (key: string) => `sha256:${sha256Hex(key)}`;

export function registryJson(clients: readonly TestClient[]): string {
  return JSON.stringify({
    clients: clients.map((client) => ({ ...client, keys: client.keys.map(keyHash) })),
  });
}

/** Writes the registry to a fresh temp directory and returns the file's path. */
export function writeClientsFile(clients: readonly TestClient[]): string {
  const file = join(tempDir('bff-clients-'), 'clients.json');
  writeFileSync(file, registryJson(clients));
  return file;
}
