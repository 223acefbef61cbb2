// Express types `res.locals` as `Record<string, any> & Express.Locals`: an undeclared key compiles, as `any`. Every
// key src/ reads or writes must therefore be declared in src/types/express.d.ts, and read by name, not by a string.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '../../..');
const DECLARATION = 'src/types/express.d.ts';

/** The members of `interface Locals` in the declaration file. */
function declaredLocals(): Set<string> {
  const source = ts.createSourceFile(
    DECLARATION,
    readFileSync(join(ROOT, DECLARATION), 'utf8'),
    ts.ScriptTarget.Latest,
    true,
  );
  const names = new Set<string>();
  const visit = (node: ts.Node) => {
    if (ts.isInterfaceDeclaration(node) && node.name.text === 'Locals')
      for (const member of node.members)
        if (member.name && ts.isIdentifier(member.name)) names.add(member.name.text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return names;
}

const isLocals = (node: ts.Expression) =>
  (ts.isPropertyAccessExpression(node) && node.name.text === 'locals') ||
  (ts.isIdentifier(node) && node.text === 'locals');

/** `file: locals.<key>` for each undeclared key, `file: locals[...]` for each access by a computed name. */
function untypedUses(file: string, text: string, declared: Set<string>): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isPropertyAccessExpression(node) && isLocals(node.expression) && !declared.has(node.name.text))
      found.push(`${file}: locals.${node.name.text}`);
    if (ts.isElementAccessExpression(node) && isLocals(node.expression))
      found.push(`${file}: locals[${node.argumentExpression.getText(source)}]`);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('res.locals is typed (Express.Locals)', () => {
  const declared = declaredLocals();

  test('every key src/ uses is declared in src/types/express.d.ts', () => {
    expect(declared.size).toBeGreaterThan(5);
    const files = readdirSync(join(ROOT, 'src'), { withFileTypes: true, recursive: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
      .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));
    const uses = files.flatMap((file) => untypedUses(file, readFileSync(join(ROOT, file), 'utf8'), declared));
    expect(uses).toEqual([]);
  });

  test('catches a deliberate violation: an undeclared key, a key by string, a destructured locals', () => {
    const text = [
      'export function h(req: any, res: any) {',
      '  res.locals.route = "plan";',
      '  res.locals.secretThing = req.headers.authorization;',
      "  const x = res.locals['route'];",
      '  const { locals } = res;',
      '  locals.other = 1;',
      '  return x;',
      '}',
    ].join('\n');
    expect(untypedUses('src/routes/deliberate.ts', text, declared)).toEqual([
      'src/routes/deliberate.ts: locals.secretThing',
      "src/routes/deliberate.ts: locals['route']",
      'src/routes/deliberate.ts: locals.other',
    ]);
  });
});
