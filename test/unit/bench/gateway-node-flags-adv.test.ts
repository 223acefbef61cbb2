// Adversarial checks of the runtime flags (package.json's config.nodeFlags): not that the strings look right, but
// that `npm start` and the bench really start node with them, one argument each, and that they take effect.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gatewayNodeFlags } from '../../../bench/lib/gateway-node-flags';
import { startGatewayProcess } from '../../../bench/lib/processes';
import { tempDir } from '../../support/temp-dir';

const ROOT = resolve(__dirname, '..', '..', '..');
const MIB = 1024 * 1024;
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  config: { nodeFlags: string };
  scripts: { start: string };
};

interface Report {
  execArgv: string[];
  newSpaceMiB: number;
}

/** What a stand-in for dist/src/main.js prints (or, with PORT set, answers on /readyz): how node was started. */
const REPORT = `const v8 = require('node:v8');
const report = () => JSON.stringify({ execArgv: process.execArgv,
  newSpaceMiB: v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / ${MIB} });
if (process.env.PORT) require('node:http').createServer((q, a) => a.end(report())).listen(+process.env.PORT, '127.0.0.1');
else console.log(report());
`;

/** A checkout with this package.json's config and start script, a no-op build step and the stand-in main.js. */
function standIn(config: object | undefined): string {
  const dir = tempDir('node-flags-adv-');
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: manifest.name,
      private: true,
      config,
      scripts: { start: manifest.scripts.start },
    }),
  );
  mkdirSync(join(dir, 'scripts'));
  writeFileSync(join(dir, 'scripts/build.js'), '');
  mkdirSync(join(dir, 'dist/src'), { recursive: true });
  writeFileSync(join(dir, 'dist/src/main.js'), REPORT);
  // As in the project (the `node` devDependency), npm scripts run this Node.
  mkdirSync(join(dir, 'node_modules/.bin'), { recursive: true });
  symlinkSync(process.execPath, join(dir, 'node_modules/.bin/node'));
  writeFileSync(join(dir, 'npmrc'), '');
  return dir;
}

/** `npm start` in `dir`, with no npm settings of this run's own (npm_* variables, the user's npmrc). */
function npmStart(dir: string, extra: string[] = []): Report {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
  const out = execFileSync('npm', ['start', '--silent', ...extra], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...env, npm_config_userconfig: join(dir, 'npmrc'), npm_config_update_notifier: 'false' },
  });
  return JSON.parse(out.trim().split('\n').at(-1) ?? '') as Report;
}

const flags = gatewayNodeFlags(ROOT);

describe('npm start', () => {
  test('starts node with config.nodeFlags, one argument each, and a 64 MiB young generation', () => {
    const report = npmStart(standIn(manifest.config));
    expect(report.execArgv).toEqual(flags);
    expect(report.newSpaceMiB).toBe(64);
  });

  test('from a subdirectory and with --prefix, the same', () => {
    const dir = standIn(manifest.config);
    mkdirSync(join(dir, 'sub/dir'), { recursive: true });
    expect(npmStart(join(dir, 'sub/dir')).execArgv).toEqual(flags);
    expect(npmStart(tempDir('elsewhere-'), ['--prefix', dir]).execArgv).toEqual(flags);
  });

  // A developer's script-shell setting. zsh does not split an unquoted $var into words: with `start` reading
  // $npm_package_config_nodeFlags, node got the flags as ONE argument and exited 9 ("bad option"). `start` now spells
  // them out (container-files.test.ts holds it equal to config.nodeFlags, as the CMD is).
  const shells = ['/bin/sh', '/bin/bash', '/bin/zsh', '/usr/bin/zsh'].filter((s) => existsSync(s));
  for (const shell of shells.filter(
    (s, i) => shells.findIndex((t) => realpathSync(t) === realpathSync(s)) === i,
  ))
    test(`with script-shell ${shell}, the same`, () => {
      expect(npmStart(standIn(manifest.config), [`--script-shell=${shell}`]).execArgv).toEqual(flags);
    });

  test('NODE_OPTIONS cannot undo them (the command line wins), so the documented way is the only one', () => {
    const dir = standIn(manifest.config);
    const env = { ...process.env, NODE_OPTIONS: '--max-semi-space-size=16' };
    const out = execFileSync(process.execPath, [...flags, join(dir, 'dist/src/main.js')], {
      encoding: 'utf8',
      env,
    });
    expect((JSON.parse(out) as Report).newSpaceMiB).toBe(64);
  });
});

describe("the bench's gateway processes", () => {
  test("startGatewayProcess puts its build's config.nodeFlags on the gateway's command line", async () => {
    const { proc, url } = await startGatewayProcess('flags-adv', {}, [], standIn(manifest.config));
    try {
      const report = (await (await fetch(`${url}/readyz`)).json()) as Report;
      expect(report.execArgv).toEqual(flags);
      expect(report.newSpaceMiB).toBe(64);
    } finally {
      await proc.stop();
    }
  });

  test('an older build without config.nodeFlags runs with none (profiling args first still pass through)', async () => {
    const { proc, url } = await startGatewayProcess(
      'flags-adv-old',
      {},
      ['--stack-size=2000'],
      standIn(undefined),
    );
    try {
      const report = (await (await fetch(`${url}/readyz`)).json()) as Report;
      expect(report.execArgv).toEqual(['--stack-size=2000']);
    } finally {
      await proc.stop();
    }
  });
});
