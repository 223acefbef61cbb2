// `npm run operations -- list | import <provider-openapi.json|yaml> [--out FILE]` (docs/catalogue.md).
import { readFileSync, writeFileSync } from 'node:fs';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { ConfigError } from '../config/config-error';
import { loadConfig } from '../config/load-config';
import { draftFromProviderDocument } from './internal/import-draft';
import { CatalogueError, loadCatalogue, parseCatalogue } from './internal/load-catalogue';

export const USAGE = `Usage:
  npm run operations -- list
      What OPERATIONS_FILE (default config/operations.json) serves: method, path, operationId, scope, cache,
      idempotency; and the operations it declares without a scope (not served).
  npm run operations -- import <provider-openapi.json|yaml> [--out FILE]
      A catalogue draft of every operation of the provider's OpenAPI document, none with a scope (nothing is
      served until reviewed), to FILE (YAML when it ends in .yaml/.yml) or standard output.`;

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

const isYaml = (file: string) => /\.ya?ml$/i.test(file);

export function runOperationsCli(args: readonly string[], env: NodeJS.ProcessEnv, io: Io): number {
  const [command, ...rest] = args;
  try {
    if (command === 'list' && rest.length === 0) return list(env, io);
    if (command === 'import' && rest[0] !== undefined && !rest[0].startsWith('-'))
      return importDraft(rest, io);
  } catch (error) {
    if (error instanceof CatalogueError || error instanceof ConfigError) {
      io.err(`operations: ${error.message}`);
      return 1;
    }
    throw error;
  }
  io.err(USAGE);
  return command === '--help' ? 0 : 2;
}

function list(env: NodeJS.ProcessEnv, io: Io): number {
  const config = loadConfig(env);
  const catalogue = loadCatalogue(config.callers.operationsFile, { maxTimeoutMs: config.upstream.timeoutMs });
  const rows = [
    ['METHOD', 'PATH', 'OPERATION', 'SCOPE', 'CACHE', 'IDEMPOTENCY'],
    ...catalogue.operations.map((operation) => [
      operation.method,
      operation.path,
      operation.id,
      operation.scope,
      operation.cacheTtlSeconds === undefined ? '-' : `${operation.cacheTtlSeconds}s`,
      operation.idempotency,
    ]),
  ];
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
  io.out(`${config.callers.operationsFile}`);
  for (const row of rows)
    io.out(
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    );
  if (catalogue.unserved.length > 0) io.out(`not served (no scope): ${catalogue.unserved.join(', ')}`);
  return 0;
}

function importDraft(args: readonly string[], io: Io): number {
  const [input, flag, out, ...extra] = args as [string, ...string[]];
  if (
    (flag !== undefined && flag !== '--out') ||
    (flag === '--out' && out === undefined) ||
    extra.length > 0
  ) {
    io.err(USAGE);
    return 2;
  }
  let provider: unknown;
  try {
    const text = readFileSync(input, 'utf8');
    provider = isYaml(input) ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    io.err(
      `operations: ${input}: cannot be read as ${isYaml(input) ? 'YAML' : 'JSON'} (${(error as Error).message})`,
    );
    return 1;
  }
  let imported: ReturnType<typeof draftFromProviderDocument>;
  try {
    imported = draftFromProviderDocument(provider);
  } catch (error) {
    io.err(`operations: ${input}: ${(error as Error).message}`);
    return 1;
  }
  const text = out && isYaml(out) ? toYaml(imported.draft) : `${JSON.stringify(imported.draft, null, 2)}\n`;
  // The draft loads as a catalogue that serves nothing; what would stop it loading is said now, not at deploy.
  try {
    parseCatalogue(JSON.stringify(imported.draft), 'json', { maxTimeoutMs: Number.MAX_SAFE_INTEGER });
  } catch (error) {
    if (!(error instanceof CatalogueError)) throw error;
    io.err(`operations: the draft needs fixing before it loads: ${error.problems.join('; ')}`);
  }
  if (out) writeFileSync(out, text);
  else io.out(text.trimEnd());
  io.err(
    `operations: ${imported.operations.length} operations imported without a scope (none served until reviewed)${out ? ` into ${out}` : ''}`,
  );
  return 0;
}

if (require.main === module) {
  process.exitCode = runOperationsCli(process.argv.slice(2), process.env, {
    out: (text) => process.stdout.write(`${text}\n`),
    err: (text) => process.stderr.write(`${text}\n`),
  });
}
