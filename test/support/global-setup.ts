// Fails fast, with the fix, when the machine lacks what the integration tests start for real; makes the run's temp dir.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_TMPDIR_VARIABLE } from './temp-dir';

export default function globalSetup(): void {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 24) {
    throw new Error(
      `Tests run on the project's pinned Node 24 (found ${process.version}). Run them through npm (npm test), ` +
        'which puts node_modules/.bin/node first on the PATH.',
    );
  }
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error(
      'redis-server is not on the PATH. The integration tests start real Redis instances on ephemeral ports. ' +
        'Install it with `apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis` (macOS); ' +
        '`npm test` installs it as root (its pretest step); `npx jest` skips that step.',
    );
  }
  // Workers inherit it: every temp dir of the run goes under it, and global-teardown.ts removes it.
  process.env[TEST_TMPDIR_VARIABLE] = mkdtempSync(join(tmpdir(), 'bff-test-run-'));
}
