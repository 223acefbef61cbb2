// `npm run build`, and the first step of the operator's commands (start, doctor, usage, simulator, bench): compiles
// dist/ only when it is stale, so a command whose sources did not change starts at once from the built output.
// The staleness check is the compiler's own (`tsc -b` with an incremental build-info file, tsconfig.build.json):
// a source, a tsconfig or the set of files changed. Two gaps of that check are closed here: an output deleted by
// hand forces a full build, as does a dependency install (package-lock); and an output whose source was deleted or
// renamed is removed, so that a command can never run code that is no longer in the tree. The Docker image does not
// use this: it compiles from scratch (`tsc -p tsconfig.json`) in a clean stage.
'use strict';
const { existsSync, readdirSync, rmdirSync, rmSync, statSync } = require('node:fs');
const { join, resolve } = require('node:path');
const ts = require('typescript');

/**
 * Brings the output of `configFile` up to date. Returns `built` (the compiler ran: something was stale), `removed`
 * (outputs without a source, deleted) and the compiler's exit status (0 when it succeeded or had nothing to do).
 * @param {string} configFile
 * @param {{ dependencyFiles?: string[], force?: boolean }} [options] dependency files newer than the build info force
 *   a full build
 * @returns {{ built: boolean, removed: string[], status: number }}
 */
function buildIfStale(configFile, options = {}) {
  const config = resolve(configFile);
  const parsed = parseConfig(config);
  const outDir = parsed.options.outDir;
  const buildInfo = parsed.options.tsBuildInfoFile;
  if (!outDir || !buildInfo || !parsed.options.incremental)
    throw new Error(`${configFile}: needs outDir, incremental and tsBuildInfoFile`);
  const expected = new Set(
    parsed.fileNames.flatMap((file) =>
      ts.getOutputFileNames(parsed, file, !ts.sys.useCaseSensitiveFileNames).map((out) => resolve(out)),
    ),
  );
  const force =
    options.force === true ||
    [...expected].some((out) => !existsSync(out)) ||
    newerThan(options.dependencyFiles ?? [], resolve(buildInfo));

  const report = ts.createDiagnosticReporter(ts.sys, ts.sys.writeOutputIsTTY?.() ?? false);
  const host = ts.createSolutionBuilderHost(ts.sys, undefined, report, () => {});
  const builder = ts.createSolutionBuilder(host, [config], { force });
  let built = false;
  let status = ts.ExitStatus.Success;
  for (
    let project = builder.getNextInvalidatedProject();
    project;
    project = builder.getNextInvalidatedProject()
  ) {
    built = true;
    const done = project.done();
    if (done !== ts.ExitStatus.Success) status = done;
  }
  const removed = removeOrphans(resolve(outDir), expected, resolve(buildInfo));
  return { built, removed, status };
}

/** The config as `tsc` reads it; an unreadable or invalid one throws with the compiler's message. */
function parseConfig(config) {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    config,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic(diagnostic) {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error(`${config}: cannot be read`);
  if (parsed.errors.length > 0)
    throw new Error(
      parsed.errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n'),
    );
  return parsed;
}

/** Whether any existing file of `files` was modified after `target` (or `target` is missing). */
function newerThan(files, target) {
  if (!existsSync(target)) return true;
  const built = statSync(target).mtimeMs;
  return files.some((file) => existsSync(file) && statSync(file).mtimeMs > built);
}

/** Deletes every file under `dir` that is neither an expected output nor the build info; empty folders go too. */
function removeOrphans(dir, expected, buildInfo) {
  const removed = [];
  const walk = (folder) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) {
        walk(path);
        if (readdirSync(path).length === 0) rmdirSync(path);
      } else if (!expected.has(path) && path !== buildInfo) {
        rmSync(path);
        removed.push(path);
      }
    }
  };
  if (existsSync(dir)) walk(dir);
  return removed;
}

module.exports = { buildIfStale };

if (require.main === module) {
  const root = resolve(__dirname, '..');
  try {
    const { removed, status } = buildIfStale(join(root, 'tsconfig.build.json'), {
      force: process.argv.includes('--force'),
      // `npm ci` / `npm install` rewrite node_modules/.package-lock.json: new dependencies mean a full build.
      dependencyFiles: [join(root, 'package-lock.json'), join(root, 'node_modules', '.package-lock.json')],
    });
    if (removed.length > 0)
      process.stderr.write(`build: removed ${removed.length} output(s) whose source is gone from dist/\n`);
    process.exitCode = status;
  } catch (error) {
    process.stderr.write(`build: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}
