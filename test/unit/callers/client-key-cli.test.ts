import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { createClientKey, runClientKeyCli, USAGE } from '../../../src/callers/client-key-cli';
import { parseClientRegistry } from '../../../src/callers/client-registry';
import { sha256Hex } from '../../../src/keys/hash';

function run(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = runClientKeyCli(args, { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('client-key', () => {
  test('makes a pbk_ key of 32 random bytes and an entry holding only its hash', () => {
    const { key, entry } = createClientKey('checkout-web', ['plans:read']);
    expect(key).toMatch(/^pbk_[A-Za-z0-9_-]{43}$/);
    expect(entry).toEqual({ id: 'checkout-web', keys: [`sha256:${sha256Hex(key)}`], scopes: ['plans:read'] });
    expect(JSON.stringify(entry)).not.toContain(key);
  });

  test('two keys are never the same', () => {
    expect(createClientKey('a', []).key).not.toBe(createClientKey('a', []).key);
  });

  test('defaults to every scope, and the printed entry is a valid registry entry', () => {
    const result = run(['mobile-backend']);
    expect(result.code).toBe(0);
    const entry = JSON.parse(result.out.slice(result.out.indexOf('{')));
    expect(entry.scopes).toEqual(['documents:validate', 'plans:read']);
    const snapshot = parseClientRegistry(JSON.stringify({ clients: [entry] }), 'pasted');
    const key = /\n {2}(pbk_\S+)\n/.exec(result.out)?.[1];
    expect(key).toBeDefined();
    expect(snapshot.byHash.has(sha256Hex(key!))).toBe(true);
  });

  test('bad arguments print the usage and exit 2', () => {
    expect(run([])).toMatchObject({ code: 2, err: USAGE });
    expect(run(['bad id!'])).toMatchObject({ code: 2 });
    // Any scope an operation may require is accepted (the catalogue declares them); a malformed one is not.
    expect(run(['ok', 'plans read']).err).toContain('malformed scope "plans read"');
    expect(run(['--help'])).toMatchObject({ code: 0, out: USAGE });
  });

  test('runs as a command (tsx)', () => {
    const root = join(__dirname, '../../..');
    const ok = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'src/callers/client-key-cli.ts', 'svc-1', 'plans:read'],
      {
        cwd: root,
        encoding: 'utf8',
      },
    );
    expect(ok.status).toBe(0);
    expect(ok.stdout).toMatch(/pbk_[A-Za-z0-9_-]{43}/);
    expect(ok.stdout).toContain('"id": "svc-1"');
    const bad = spawnSync(process.execPath, ['--import', 'tsx', 'src/callers/client-key-cli.ts'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('Usage: npm run client-key');
  });
});
