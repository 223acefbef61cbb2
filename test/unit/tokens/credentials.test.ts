import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { deriveKey } from '../../../src/keys/derived-keys';
import {
  type Credentials,
  createCredentialSource,
  credentialsOf,
} from '../../../src/tokens/internal/credentials';
import { tempDir } from '../../support/temp-dir';
import { captureLogger } from './token-fakes';

const waitUntil = async (check: () => boolean, ms = 3000) => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

/** Credential files of `alice` (first-pw) read by a source that only re-reads them on reload(). */
async function aliceFromFiles() {
  const dir = tempDir('bff-cred-');
  writeFileSync(join(dir, 'username'), 'alice\n');
  writeFileSync(join(dir, 'password'), 'first-pw\n');
  const { logger, lines } = captureLogger();
  const source = await createCredentialSource(
    { usernameFile: join(dir, 'username'), passwordFile: join(dir, 'password') },
    { logger, pollIntervalMs: 0, debounceMs: 10_000 },
  );
  return { dir, source, lines };
}

describe('credential source', () => {
  it('uses inline values', async () => {
    const { logger } = captureLogger();
    const source = await createCredentialSource({ username: 'u', password: 'p' }, { logger });
    expect(source.current()).toMatchObject({ username: 'u', password: 'p' });
    expect(await source.reload()).toBe(false);
    source.close();
  });

  it('refuses to start without credentials', async () => {
    const { logger } = captureLogger();
    await expect(createCredentialSource({}, { logger })).rejects.toThrow('missing');
  });

  it('re-reads files on reload() and tells listeners; an unchanged or empty file changes nothing', async () => {
    const { dir, source, lines } = await aliceFromFiles();
    const seen: Credentials[] = [];
    source.onChange((c) => seen.push(c));
    expect(source.current()).toMatchObject({ username: 'alice', password: 'first-pw' });
    const original = source.current().fingerprint;
    expect(await source.reload()).toBe(false);
    writeFileSync(join(dir, 'password'), 'second-pw');
    expect(await source.reload()).toBe(true);
    expect(seen.map((c) => c.password)).toEqual(['second-pw']);
    expect(seen[0].fingerprint).not.toBe(original);
    writeFileSync(join(dir, 'password'), '');
    expect(await source.reload()).toBe(false);
    unlinkSync(join(dir, 'password'));
    expect(await source.reload()).toBe(false);
    expect(source.current().password).toBe('second-pw');
    expect(lines()).not.toMatch(/alice|first-pw|second-pw/);
    source.close();
  });

  it('a listener that throws is logged and never keeps the later ones in the old credentials', async () => {
    const { dir, source, lines } = await aliceFromFiles();
    const seen: string[] = [];
    source.onChange(() => {
      throw new TypeError('a broken component');
    });
    source.onChange((c) => seen.push(c.password));
    writeFileSync(join(dir, 'password'), 'second-pw');
    expect(await source.reload()).toBe(true);
    expect(seen).toEqual(['second-pw']);
    expect(source.current().password).toBe('second-pw');
    expect(lines()).toContain('credentials.listener_failed');
    expect(lines()).not.toContain('cannot be read');
    expect(lines()).not.toMatch(/alice|first-pw|second-pw/);
    source.close();
  });

  it('notices a Kubernetes-style symlink swap by watching the directory', async () => {
    const dir = tempDir('bff-cred-');
    const write = (version: string, username: string) => {
      const data = join(dir, version);
      mkdirSync(data);
      writeFileSync(join(data, 'username'), username);
      writeFileSync(join(data, 'password'), 'pw');
      symlinkSync(version, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    };
    write('v1', 'alice');
    symlinkSync('..data/username', join(dir, 'username'));
    symlinkSync('..data/password', join(dir, 'password'));
    const { logger } = captureLogger();
    const source = await createCredentialSource(
      { usernameFile: join(dir, 'username'), passwordFile: join(dir, 'password') },
      { logger, pollIntervalMs: 1_000, debounceMs: 20 },
    );
    const seen: string[] = [];
    source.onChange((c) => seen.push(c.username));
    write('v2', 'bob');
    await waitUntil(() => seen.length === 1);
    expect(seen).toEqual(['bob']);
    expect(source.current().username).toBe('bob');
    source.close();
  });

  it('the periodic re-read catches a change the watcher missed', async () => {
    const dir = tempDir('bff-cred-');
    writeFileSync(join(dir, 'username'), 'alice');
    writeFileSync(join(dir, 'password'), 'pw');
    const { logger } = captureLogger();
    const source = await createCredentialSource(
      { usernameFile: join(dir, 'username'), passwordFile: join(dir, 'password') },
      // A huge debounce stands for a missed watch event.
      { logger, pollIntervalMs: 50, debounceMs: 60_000 },
    );
    writeFileSync(join(dir, 'username'), 'carol');
    await waitUntil(() => source.current().username === 'carol');
    source.close();
  });
});

describe('credential fingerprint', () => {
  const plainHash = (u: string, p: string) => createHash('sha256').update(`${u}\n${p}`).digest('hex');

  it('with an encryption key: an HMAC under the derived key, the same on every replica, no plain hash', () => {
    const master = randomBytes(32);
    const onReplicaA = credentialsOf('merchant', 'S3cret', deriveKey(master, 'credential-fingerprint'));
    const onReplicaB = credentialsOf('merchant', 'S3cret', deriveKey(master, 'credential-fingerprint'));
    expect(onReplicaB.fingerprint).toBe(onReplicaA.fingerprint);
    expect(plainHash('merchant', 'S3cret')).not.toContain(onReplicaA.fingerprint);
    // Without the key nobody can recompute it, so a guess cannot be tested against what Redis holds.
    const otherKey = credentialsOf(
      'merchant',
      'S3cret',
      deriveKey(randomBytes(32), 'credential-fingerprint'),
    );
    expect(otherKey.fingerprint).not.toBe(onReplicaA.fingerprint);
    expect(
      credentialsOf('merchant', 'S3cret2', deriveKey(master, 'credential-fingerprint')).fingerprint,
    ).not.toBe(onReplicaA.fingerprint);
  });

  it('without a key: a salted slow hash, stable across replicas, not the plain hash, different per username', () => {
    const a = credentialsOf('merchant', 'S3cret');
    expect(credentialsOf('merchant', 'S3cret').fingerprint).toBe(a.fingerprint);
    expect(a.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(plainHash('merchant', 'S3cret')).not.toContain(a.fingerprint);
    expect(credentialsOf('merchant-2', 'S3cret').fingerprint).not.toBe(a.fingerprint);
  });
});
