// Runs one of the project's TypeScript entry points as a process to its exit, for the tests of what it prints.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');

/**
 * `script` (a path from the repository root) under tsx with only PATH and `env`, and `args` after it; its exit code
 * and all it printed.
 */
export function runToExit(
  script: string,
  env: Record<string, string>,
  args: readonly string[] = [],
): Promise<{ code: number | null; output: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('exit', (code) => done({ code, output }));
  });
}
