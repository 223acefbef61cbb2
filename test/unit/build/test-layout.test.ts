// Tests mirror src/: test/unit and test/integration hold folders named after src/ folders (and bench/, the build,
// the docs), and a test named after a module of src/ sits in that module's folder.
import { readdirSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../../..');
/** Test folders for what lives outside src/: bench/, the build and lint set-up, the documents. */
const NOT_IN_SRC = new Set(['bench', 'build', 'docs']);

function filesUnder(dir: string, suffix: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(suffix))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));
}

/** Misplaced tests of `tests` (paths like test/unit/<folder>/<name>.test.ts) given the modules of src/. */
function misplaced(tests: string[], modules: string[]): string[] {
  const folders = new Set(modules.map((m) => m.split('/')[1]).filter((f) => f && !f.endsWith('.ts')));
  const homes = new Map<string, Set<string>>();
  for (const module of modules) {
    const [, folder] = module.split('/');
    // The builders of src/assembly/ are named after the folders they build.
    if (!folder || folder.endsWith('.ts') || folder === 'assembly') continue;
    const name = basename(module, '.ts');
    homes.set(name, (homes.get(name) ?? new Set()).add(folder));
  }
  const found: string[] = [];
  for (const test of tests) {
    const folder = test.split('/')[2] ?? '';
    if (!folders.has(folder) && !NOT_IN_SRC.has(folder)) found.push(`${test}: no src/${folder}/`);
    const home = homes.get(basename(test, '.test.ts'));
    if (home && !home.has(folder)) found.push(`${test}: belongs in ${[...home].join(' or ')}/`);
  }
  return found;
}

describe('tests mirror the layout of src/', () => {
  const modules = filesUnder('src', '.ts');
  const tests = [...filesUnder('test/unit', '.test.ts'), ...filesUnder('test/integration', '.test.ts')];

  test('every unit and integration test sits in the folder of what it tests', () => {
    expect(tests.length).toBeGreaterThan(50);
    expect(misplaced(tests, modules)).toEqual([]);
  });

  test('catches a deliberate violation: a folder src/ does not have, a test in another folder than its module', () => {
    expect(
      misplaced(
        [
          'test/unit/upstream/token-manager.test.ts',
          'test/integration/routes/circuit-breaker.test.ts',
          'test/unit/forwarding/circuit-breaker.test.ts',
          'test/unit/assembly/lifecycle.test.ts',
        ],
        modules,
      ),
    ).toEqual([
      'test/unit/upstream/token-manager.test.ts: no src/upstream/',
      'test/unit/upstream/token-manager.test.ts: belongs in tokens/',
      'test/integration/routes/circuit-breaker.test.ts: belongs in forwarding/',
    ]);
  });
});
