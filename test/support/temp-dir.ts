// Temp directories for tests and the benchmark, never left behind. Under Jest they sit in the run's own directory
// (BFF_TEST_TMPDIR, made by global-setup.ts and removed by global-teardown.ts, so a killed worker leaves nothing);
// elsewhere in the OS temp dir, removed when the process exits.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const TEST_TMPDIR_VARIABLE = 'BFF_TEST_TMPDIR';

const made: string[] = [];

function removeAll(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** A fresh directory named `<prefix>XXXXXX`. */
export function tempDir(prefix: string): string {
  if (made.length === 0) process.once('exit', removeAll);
  const dir = mkdtempSync(join(process.env[TEST_TMPDIR_VARIABLE] ?? tmpdir(), prefix));
  made.push(dir);
  return dir;
}
