// What the Quick start promises of an older global Node: the EBADENGINE warnings of `npm install` are harmless because
// every npm script runs on the project's own Node 24 (the `node` devDependency), whatever `node` the shell finds first.
import { execFileSync } from 'node:child_process';
import { delimiter, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../../..');

test('npm scripts run on Node 24 from a shell whose PATH knows only the global node', () => {
  // A newcomer's shell: no node_modules/.bin (jest itself was started through one), so `npm` and `node` are global.
  const newcomerPath = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => !dir.includes('node_modules'))
    .join(delimiter);
  const version = execFileSync('npm', ['exec', '--offline', '--call', 'node -p process.version'], {
    cwd: ROOT,
    env: { ...process.env, PATH: newcomerPath },
    encoding: 'utf8',
  }).trim();
  expect(version).toMatch(/^v24\./);
});
