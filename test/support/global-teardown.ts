// Removes the run's temp directory (see temp-dir.ts), whatever the tests left in it.
import { rmSync } from 'node:fs';
import { TEST_TMPDIR_VARIABLE } from './temp-dir';

export default function globalTeardown(): void {
  const dir = process.env[TEST_TMPDIR_VARIABLE];
  if (dir) rmSync(dir, { recursive: true, force: true });
}
