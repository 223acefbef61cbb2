// The documents a reader follows: every relative link resolves, no document cites one that is not in the
// repository, and the configuration tables (the README's and docs/configuration.md) list exactly the variables the
// gateway reads, each once.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { envSchema } from '../../../src/config/env-schema';

const root = resolve(__dirname, '../../..');
const SKIPPED_DIRECTORIES = new Set(['node_modules', 'dist', 'coverage', '.git']);

function markdownFiles(directory: string): string[] {
  return readdirSync(directory).flatMap((name) => {
    if (SKIPPED_DIRECTORIES.has(name)) return [];
    const path = join(directory, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes. */
function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function withoutCode(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => headingAnchor(m[1] as string)));
}

/** The variables named in the first column of a document's tables. */
function variablesInTable(text: string): string[] {
  const rows = text.split('\n').filter((line) => line.startsWith('|'));
  return rows.flatMap((row) =>
    [...(row.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] as string),
  );
}

const documents = markdownFiles(root);

describe('documents', () => {
  it('finds the README and the documents beside the code', () => {
    const names = documents.map((file) => relative(root, file));
    expect(names).toContain('README.md');
    expect(names.length).toBeGreaterThan(3);
  });

  it.each(documents.map((file) => [relative(root, file), file]))(
    '%s: every relative link resolves',
    (_, file) => {
      const broken: string[] = [];
      for (const match of withoutCode(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] as string;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const targetFile = path ? resolve(dirname(file), decodeURIComponent(path)) : file;
        if (!existsSync(targetFile)) broken.push(`${target} (no such file)`);
        else if (anchor && targetFile.endsWith('.md') && !anchorsOf(targetFile).has(anchor)) {
          broken.push(`${target} (no such heading)`);
        }
      }
      expect(broken).toEqual([]);
    },
  );

  it.each(documents.map((file) => [relative(root, file), file]))(
    '%s: cites no document outside the repository',
    (_, file) => {
      const text = readFileSync(file, 'utf8');
      expect(text.match(/SPEC(\.md)? ?§|\.\.\/shared\/|DEVELOPERS\.md|STYLE\.md/g) ?? []).toEqual([]);
    },
  );

  it('the configuration tables (README and docs/configuration.md) name every variable the gateway reads, once each, and no other', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const section = readme.slice(
      readme.indexOf('\n## Configuration'),
      readme.indexOf('\n## ', readme.indexOf('\n## Configuration') + 1),
    );
    const rest = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
    const named = [...variablesInTable(section), ...variablesInTable(rest)];
    const read = Object.keys(envSchema.shape);
    expect(read.filter((name) => !named.includes(name))).toEqual([]);
    expect(named.filter((name) => !read.includes(name))).toEqual([]);
    expect(named.filter((name, index) => named.indexOf(name) !== index)).toEqual([]);
  });
});

describe('headingAnchor', () => {
  it('follows GitHub: lower case, punctuation dropped, spaces to dashes', () => {
    expect(headingAnchor('Callers: onboarding, scopes, limits, CORS')).toBe(
      'callers-onboarding-scopes-limits-cors',
    );
    expect(headingAnchor('`npm run doctor`')).toBe('npm-run-doctor');
  });
});
