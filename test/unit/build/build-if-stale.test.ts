// The build step in front of the operator's commands (scripts/build.js): a current dist/ is left alone, so the
// command starts at once; anything stale (a changed, added or deleted source, a deleted output, a new dependency
// install) is compiled, and an output whose source is gone is removed so that it can never run again.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type BuildOptions, type BuildResult, buildIfStale } from '../../../scripts/build';
import { tempDir } from '../../support/temp-dir';

interface Project {
  readonly dir: string;
  /** Writes a file of the project, dated after everything before it. */
  write(file: string, text: string): void;
  /** Runs the build step; then dates its outputs after everything before them, as a build's own writes are. */
  build(options?: BuildOptions): BuildResult;
  out(file: string): string;
  /** Paths relative to the project. */
  relative(paths: readonly string[]): string[];
}

/** A small project laid out as this one: sources under src/, outputs under dist/, the build info inside dist/. */
function project(): Project {
  const dir = tempDir('build-if-stale-');
  mkdirSync(join(dir, 'src'));
  const config = join(dir, 'tsconfig.build.json');
  writeFileSync(
    config,
    JSON.stringify({
      compilerOptions: {
        target: 'es2023',
        lib: ['es2023'],
        module: 'nodenext',
        moduleResolution: 'nodenext',
        rootDir: '.',
        outDir: 'dist',
        strict: true,
        types: [],
        sourceMap: true,
        incremental: true,
        tsBuildInfoFile: 'dist/.tsbuildinfo',
      },
      include: ['src/**/*.ts'],
    }),
  );
  // A clock of its own, in the past and 10 s a step: every edit is clearly newer than the build before it and
  // every build newer than the edits before it, however fast the steps run (the check compares modification times).
  let clock = Math.floor(Date.now() / 1000) - 100_000;
  const tick = (path: string) => {
    clock += 10;
    utimesSync(path, clock, clock);
  };
  const age = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) age(path);
      else tick(path);
    }
  };
  utimesSync(config, clock, clock);
  return {
    dir,
    write(file, text) {
      writeFileSync(join(dir, file), text);
      tick(join(dir, file));
    },
    build(options) {
      const result = buildIfStale(config, options);
      if (existsSync(join(dir, 'dist'))) age(join(dir, 'dist'));
      return result;
    },
    out: (file) => readFileSync(join(dir, 'dist', file), 'utf8'),
    relative: (paths) => paths.map((path) => path.slice(dir.length + 1)).sort(),
  };
}

test('builds a stale output, leaves a current one alone, and removes the output of a deleted source', () => {
  const p = project();
  p.write('src/main.ts', "import { greeting } from './greeting';\nexport const line = greeting;\n");
  p.write('src/greeting.ts', "export const greeting = 'hello';\n");

  // Never built: compiles everything.
  expect(p.build()).toEqual({ built: true, removed: [], status: 0 });
  expect(p.out('src/greeting.js')).toContain("'hello'");
  expect(existsSync(join(p.dir, 'dist/src/main.js.map'))).toBe(true);

  // Nothing changed: the compiler does not run.
  expect(p.build()).toEqual({ built: false, removed: [], status: 0 });

  // A source changed: compiled again, the new text in the output.
  p.write('src/greeting.ts', "export const greeting = 'hello again';\n");
  expect(p.build().built).toBe(true);
  expect(p.out('src/greeting.js')).toContain("'hello again'");
  expect(p.build().built).toBe(false);

  // A source deleted (its importer changed with it): its outputs go too, the output map included.
  p.write('src/main.ts', "export const line = 'inline';\n");
  rmSync(join(p.dir, 'src/greeting.ts'));
  const afterDelete = p.build();
  expect(afterDelete.built).toBe(true);
  expect(p.relative(afterDelete.removed)).toEqual(['dist/src/greeting.js', 'dist/src/greeting.js.map']);
  expect(existsSync(join(p.dir, 'dist/src/greeting.js'))).toBe(false);
  expect(p.out('src/main.js')).toContain("'inline'");
});

test('an output deleted by hand or a newer lockfile forces a build the compiler would have skipped', () => {
  const p = project();
  p.write('src/main.ts', 'export const answer = 42;\n');
  expect(p.build().built).toBe(true);

  rmSync(join(p.dir, 'dist/src/main.js'));
  expect(p.build().built).toBe(true);
  expect(p.out('src/main.js')).toContain('42');

  const lockfile = join(p.dir, 'package-lock.json');
  p.write('package-lock.json', '{}');
  expect(p.build({ dependencyFiles: [lockfile] }).built).toBe(true);
  expect(p.build({ dependencyFiles: [lockfile] }).built).toBe(false);
});

test('a stray file in dist/ that no source makes is removed even when nothing needs compiling', () => {
  const p = project();
  p.write('src/main.ts', 'export const answer = 42;\n');
  p.build();
  mkdirSync(join(p.dir, 'dist/src/old'));
  writeFileSync(join(p.dir, 'dist/src/old/doctor-cli.js'), "console.log('stale');\n");
  const result = p.build();
  expect(result.built).toBe(false);
  expect(p.relative(result.removed)).toEqual(['dist/src/old/doctor-cli.js']);
  expect(existsSync(join(p.dir, 'dist/src/old'))).toBe(false);
});

test("the operator's commands run the build step, then the built output; the build info lives inside dist/", () => {
  const root = join(__dirname, '../../..');
  const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  // `start` runs the gateway with its production flags (package.json config.nodeFlags), as the image's CMD does.
  for (const name of ['start', 'simulator', 'doctor', 'usage', 'bench', 'bench:features', 'soak'])
    expect(scripts[name]).toMatch(/^node scripts\/build\.js && node (--[\w-]+=\d+ )*dist\//);
  expect(scripts.build).toBe('node scripts/build.js');
  const build = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8')) as {
    extends: string;
    compilerOptions: Record<string, unknown>;
  };
  // Deleting dist/ deletes the build info with it: the next command compiles everything.
  expect(build).toEqual({
    extends: './tsconfig.json',
    compilerOptions: { incremental: true, tsBuildInfoFile: 'dist/.tsbuildinfo' },
  });
});
