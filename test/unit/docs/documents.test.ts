// The documents a reader follows: every relative link resolves, no document cites one that is not in the
// repository, and the README's configuration table lists exactly the variables the gateway reads.
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

  it('the README configuration table names every variable the gateway reads, and no other', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const section = readme.slice(
      readme.indexOf('\n## Configuration'),
      readme.indexOf('\n## ', readme.indexOf('\n## Configuration') + 1),
    );
    const rows = section.split('\n').filter((line) => line.startsWith('|'));
    const named = new Set(
      rows.flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1])),
    );
    const read = Object.keys(envSchema.shape);
    expect(read.filter((name) => !named.has(name))).toEqual([]);
    expect([...named].filter((name) => !read.includes(name as string))).toEqual([]);
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
