// One owner each, checked in the source: Redis health (the token_store_healthy gauge and the Redis down/up lines) is
// written only by src/store/redis-health.ts, every Redis key is built in src/keys/redis-keys.ts and SHA-256 is taken
// only by src/keys/hash.ts. Strings are read with the TypeScript parser, so comments do not count.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '../../..');
/** Stands for each interpolation when a template literal's parts are joined into one text. */
const HOLE = '$' + '{}';

/**
 * Texts that name Redis being lost without being the owner's down/up line, listed so that no new one appears unseen.
 * The subscriber's line is about its own connection (pub/sub notifications from other replicas are missed until it
 * reconnects), which the owner does not watch.
 */
const FALLBACK_LINES = new Set([
  'token store subscriber lost Redis',
  // Metric help texts, not log lines.
  'Rate-limit decisions taken from replica memory because Redis was unreachable.',
  'Failed token store operations (each fell back to memory or the token endpoint).',
]);

interface Owner {
  readonly rule: string;
  /** The only files allowed to do it: the owner, and exceptions named with their reason. */
  readonly owners: readonly RegExp[];
  /** Whether a string literal (its text, template parts joined by `${}`) does it. */
  readonly literal?: (text: string) => boolean;
  /** Whether the code (comments stripped) does it. */
  readonly code?: RegExp;
}

const OWNERS: readonly Owner[] = [
  {
    rule: 'health gauge written outside redis-health',
    owners: [/^src\/store\/redis-health\.ts$/],
    code: /\bstoreHealthy\s*\.\s*(set|inc|dec|reset)\s*\(/,
  },
  {
    rule: 'Redis down/up line outside redis-health',
    owners: [/^src\/store\/redis-health\.ts$/],
    literal: (text) =>
      /\b(redis|token store)\b.*\b(reach\w*|unreachable|unavailable|lost|down|up|again|back)\b/i.test(text) &&
      !FALLBACK_LINES.has(text),
  },
  {
    rule: 'Redis key built outside keys/redis-keys',
    // The simulator has no Redis.
    owners: [/^src\/keys\/redis-keys\.ts$/, /^src\/simulator\//],
    literal: (text) =>
      /^(\$\{\})?(\{token:|\{quota:|usage:|cache:|rl:|authfail:|plan:)|\}:(pair|lock|failure|transient|changed)$/.test(
        text,
      ),
  },
  {
    rule: 'SHA-256 taken outside keys/hash',
    // The simulator is self-contained; document-reference computes its keyed HMAC by hand on the request path.
    owners: [/^src\/keys\/hash\.ts$/, /^src\/simulator\//, /^src\/observability\/document-reference\.ts$/],
    code: /\b(createHash|hash)\s*\(\s*['"]sha-?256['"]/i,
  },
];

/** The string literals of `text` (template parts joined by `${}`) and its code with comments blanked. */
function read(file: string, text: string): { literals: string[]; code: string } {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const literals: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) literals.push(node.text);
    else if (ts.isTemplateExpression(node))
      literals.push(
        node.head.text + node.templateSpans.map((span) => `${HOLE}${span.literal.text}`).join(''),
      );
    ts.forEachChild(node, visit);
  };
  visit(source);
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text);
  let code = '';
  for (let token = scanner.scan(); token !== ts.SyntaxKind.EndOfFileToken; token = scanner.scan())
    code +=
      token === ts.SyntaxKind.SingleLineCommentTrivia || token === ts.SyntaxKind.MultiLineCommentTrivia
        ? ' '
        : scanner.getTokenText();
  return { literals, code };
}

function violations(file: string, text: string): string[] {
  const { literals, code } = read(file, text);
  return OWNERS.filter((owner) => !owner.owners.some((path) => path.test(file)))
    .filter(
      (owner) => (owner.code?.test(code) ?? false) || (owner.literal ? literals.some(owner.literal) : false),
    )
    .map((owner) => `${owner.rule}: ${file}`);
}

const files = readdirSync(join(ROOT, 'src'), { withFileTypes: true, recursive: true })
  .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
  .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));

describe('one owner each', () => {
  test('no file of src/ does what another owns', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(files.flatMap((file) => violations(file, readFileSync(join(ROOT, file), 'utf8')))).toEqual([]);
  });

  test('each owner does what it owns (the patterns match the real code)', () => {
    const at = (file: string) => readFileSync(join(ROOT, file), 'utf8');
    const strangers = (file: string) => violations(file.replace(/^src\//, 'src/elsewhere/'), at(file));
    expect(strangers('src/store/redis-health.ts')).toEqual([
      'health gauge written outside redis-health: src/elsewhere/store/redis-health.ts',
      'Redis down/up line outside redis-health: src/elsewhere/store/redis-health.ts',
    ]);
    expect(strangers('src/keys/redis-keys.ts')).toEqual([
      'Redis key built outside keys/redis-keys: src/elsewhere/keys/redis-keys.ts',
    ]);
    expect(strangers('src/keys/hash.ts')).toEqual([
      'SHA-256 taken outside keys/hash: src/elsewhere/keys/hash.ts',
    ]);
  });

  test('catches a deliberate violation, and never a comment', () => {
    const text = [
      "import { createHash } from 'node:crypto';",
      'export function f(metrics: any, logger: any, prefix: string, id: string) {',
      '  metrics.storeHealthy.set(0);',
      "  logger.warn('redis down: reading from memory');",
      `  const key = \`\${prefix}rl:60:\${id}\`;`,
      "  return createHash('sha256').update(key).digest('hex');",
      '}',
    ].join('\n');
    expect(violations('src/callers/deliberate.ts', text)).toEqual([
      'health gauge written outside redis-health: src/callers/deliberate.ts',
      'Redis down/up line outside redis-health: src/callers/deliberate.ts',
      'Redis key built outside keys/redis-keys: src/callers/deliberate.ts',
      'SHA-256 taken outside keys/hash: src/callers/deliberate.ts',
    ]);
    expect(violations('src/tokens/back.ts', "log.info('token store reachable again');")).toEqual([
      'Redis down/up line outside redis-health: src/tokens/back.ts',
    ]);
    const comments = [
      `// metrics.storeHealthy.set(0); \`\${prefix}rl:60:\${id}\` createHash("sha256")`,
      "/** logger.warn('redis down') */",
      'export const quiet = 1;',
    ].join('\n');
    expect(violations('src/callers/comments.ts', comments)).toEqual([]);
  });
});
