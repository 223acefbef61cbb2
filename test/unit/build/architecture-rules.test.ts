// The folder boundaries of `npm run lint` (dependency-cruiser): the real tree keeps them, and each rule catches a
// deliberate violation written into a copy of src/.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { tempDir } from '../../support/temp-dir';

const ROOT = resolve(__dirname, '../../..');
const DEPCRUISE = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');

interface Cruise {
  readonly status: number | null;
  readonly output: string;
}

function cruise(cwd: string, ...extra: string[]): Cruise {
  const result = spawnSync(
    process.execPath,
    [DEPCRUISE, 'src', '--config', '.dependency-cruiser.cjs', '--no-progress', ...extra],
    { cwd, encoding: 'utf8', timeout: 60_000 },
  );
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

/** A copy of src/ with the lint config, and the files given (path -> content) written into it. */
function treeWith(files: Record<string, string>): string {
  const dir = tempDir('architecture-');
  cpSync(join(ROOT, 'src'), join(dir, 'src'), { recursive: true });
  for (const name of ['.dependency-cruiser.cjs', 'tsconfig.json']) cpSync(join(ROOT, name), join(dir, name));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return dir;
}

/** The violations reported, as `rule: from → to` (the first module of a cycle for no-circular). */
function violations(output: string): string[] {
  return [...output.matchAll(/error (\S+): (\S+) → (\S+)?/g)].map((m) => `${m[1]}: ${m[2]} → ${m[3] ?? ''}`);
}

describe('architecture rules (dependency-cruiser in npm run lint)', () => {
  test('the real tree keeps every rule', () => {
    const result = cruise(ROOT);
    expect(result.output).toContain('no dependency violations found');
    expect(result.status).toBe(0);
  });

  test('each rule fails on a deliberate violation, and local mode may load the simulator and dev-* folders', () => {
    const dir = treeWith({
      'src/http/cycle-a.ts': "import { b } from './cycle-b';\nexport const a = () => b;\n",
      'src/http/cycle-b.ts': "import { a } from './cycle-a';\nexport const b = () => a;\n",
      'src/routes/peek.ts': "export { createTokenManager } from '../tokens/internal/token-manager';\n",
      'src/peek.ts': "export { createForwarder } from './forwarding/internal/forwarder';\n",
      'src/operations/simulate.ts': "export { startSimulator } from '../simulator/simulator';\n",
      'src/dev-identity/provider.ts': 'export const provider = 1;\n',
      'src/callers/dev-login.ts': "export { provider } from '../dev-identity/provider';\n",
      'src/local-mode-identity.ts': "export { provider } from './dev-identity/provider';\n",
      // Not even through another folder: http reaches tokens through an innocent-looking observability module.
      'src/http/token-peek.ts': "export { relay } from '../observability/relay';\n",
      'src/observability/relay.ts': "export { createTokenManager as relay } from '../tokens';\n",
      'src/simulator/gateway-peek.ts': "export { GATEWAY_VERSION } from '../gateway';\n",
      // A builder taking a type from the composition root it serves.
      'src/assembly/app-type.ts': "export type { AppDeps } from '../app';\n",
      // The forms an import can take are all seen: import(), require(), a type-only import.
      'src/routes/later.ts':
        "export const later = async () => (await import('../tokens/internal/token-manager')).createTokenManager;\n",
      'src/operations/required.ts': "export const sim = require('../simulator/simulator');\n",
      'src/routes/typed.ts':
        "import type { TokenStore } from '../tokens/internal/token-store';\nexport type S = TokenStore;\n",
      // Local mode loads the simulator: a static import of it anywhere, or any import outside the entry points.
      'src/operations/local.ts': "export { startLocalUpstream } from '../local-mode';\n",
      'src/local-mode-helpers/simulate.ts': "export { startSimulator } from '../simulator/simulator';\n",
      // Test helpers are not shipped.
      'test/support/helper.ts': 'export const helper = 1;\n',
      'src/callers/helped.ts': "export { helper } from '../../test/support/helper';\n",
    });
    const result = cruise(dir);
    expect(result.status).not.toBe(0);
    const found = violations(result.output);
    // A cycle is reported once, from whichever of its modules comes first.
    const cycles = found.filter((v) => v.startsWith('no-circular'));
    expect(cycles).toHaveLength(1);
    expect(cycles[0]).toMatch(/^no-circular: src\/http\/cycle-[ab]\.ts → $/);
    const http = found.filter((v) => v.startsWith('http-knows-no-subsystem'));
    expect(http).toContain('http-knows-no-subsystem: src/http/token-peek.ts → src/tokens/index.ts');
    expect(
      http.every((v) => v.startsWith('http-knows-no-subsystem: src/http/token-peek.ts → src/tokens/')),
    ).toBe(true);
    const others = found.filter((v) => !/^(no-circular|http-knows|no-folder-cycle)/.test(v));
    expect(others.sort()).toEqual([
      'local-mode-not-static: src/operations/local.ts → src/local-mode.ts',
      'local-mode-only-on-demand: src/operations/local.ts → src/local-mode.ts',
      'no-foreign-internal: src/routes/later.ts → src/tokens/internal/token-manager.ts',
      'no-foreign-internal: src/routes/peek.ts → src/tokens/internal/token-manager.ts',
      'no-foreign-internal: src/routes/typed.ts → src/tokens/internal/token-store.ts',
      'no-internal-from-root: src/peek.ts → src/forwarding/internal/forwarder.ts',
      'no-root-from-folders: src/assembly/app-type.ts → src/app.ts',
      'no-root-from-folders: src/simulator/gateway-peek.ts → src/gateway.ts',
      'no-test-code-in-src: src/callers/helped.ts → test/support/helper.ts',
      'simulator-only-from-local-mode: src/callers/dev-login.ts → src/dev-identity/provider.ts',
      'simulator-only-from-local-mode: src/local-mode-helpers/simulate.ts → src/simulator/simulator.ts',
      'simulator-only-from-local-mode: src/operations/required.ts → src/simulator/simulator.ts',
      'simulator-only-from-local-mode: src/operations/simulate.ts → src/simulator/simulator.ts',
      'simulator-self-contained: src/simulator/gateway-peek.ts → src/gateway.ts',
    ]);
  });

  test('a path alias is no way around: imports resolve through tsconfig.json as the compiler does', () => {
    const tsconfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8'));
    tsconfig.compilerOptions = {
      ...tsconfig.compilerOptions,
      baseUrl: '.',
      paths: { '@tokens/*': ['src/tokens/*'] },
    };
    const result = cruise(
      treeWith({
        'tsconfig.json': JSON.stringify(tsconfig),
        'src/routes/alias.ts': "export { createTokenManager } from '@tokens/internal/token-manager';\n",
      }),
    );
    expect(violations(result.output)).toEqual([
      'no-foreign-internal: src/routes/alias.ts → src/tokens/internal/token-manager.ts',
    ]);
    expect(result.status).not.toBe(0);
  });

  test('folders depend one way: a cycle between two folders fails although no module is in a cycle', () => {
    // callers/ uses http/ (GatewayError); http/ taking the Caller type from callers/ closes a loop of folders.
    const result = cruise(
      treeWith({ 'src/http/caller-type.ts': "export type { Caller } from '../callers/caller';\n" }),
    );
    expect(result.status).not.toBe(0);
    const found = violations(result.output);
    expect(found.length).toBeGreaterThan(0);
    expect(found.every((v) => v.startsWith('no-folder-cycle: '))).toBe(true);
    expect(found).toEqual(expect.arrayContaining(['no-folder-cycle: src/http → ']));
  });

  test('production start-up and the doctor load no simulator: only a dynamic import in local mode reaches it', () => {
    const graph = JSON.parse(cruise(ROOT, '--output-type', 'json').output) as {
      modules: { source: string; dependencies: { resolved: string; dynamic: boolean }[] }[];
    };
    const bySource = new Map(graph.modules.map((m) => [m.source, m]));
    const staticallyLoaded = new Set<string>();
    const visit = (source: string) => {
      if (staticallyLoaded.has(source)) return;
      staticallyLoaded.add(source);
      for (const dep of bySource.get(source)?.dependencies ?? []) if (!dep.dynamic) visit(dep.resolved);
    };
    visit('src/main.ts');
    visit('src/operations/doctor-cli.ts');
    expect(staticallyLoaded).toContain('src/gateway.ts');
    expect(staticallyLoaded).toContain('src/operations/doctor.ts');
    expect(
      [...staticallyLoaded].filter((m) => /^src\/(simulator|dev-[^/]+)\/|^src\/local-mode/.test(m)),
    ).toEqual([]);
    const dynamic = bySource
      .get('src/main.ts')
      ?.dependencies.filter((d) => d.dynamic)
      .map((d) => d.resolved);
    expect(dynamic).toEqual(['src/local-mode.ts']);
    const doctorDynamic = bySource
      .get('src/operations/doctor-cli.ts')
      ?.dependencies.filter((d) => d.dynamic)
      .map((d) => d.resolved);
    expect(doctorDynamic).toEqual(['src/local-mode.ts']);
  });
});
