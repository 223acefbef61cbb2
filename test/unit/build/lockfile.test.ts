// `npm ci` refuses a lockfile that lacks any optional dependency of a locked package (the other platforms' native
// builds of biome, swc, ...): the image build and CI then fail on a machine of another platform.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

interface LockedPackage {
  readonly version?: string;
  readonly optionalDependencies?: Readonly<Record<string, string>>;
}

const lock = JSON.parse(readFileSync(resolve(__dirname, '../../../package-lock.json'), 'utf8')) as {
  readonly packages: Readonly<Record<string, LockedPackage>>;
};

/** Where npm looks a dependency up from `location`: its own node_modules, then each parent's, then the root's. */
function resolveLocation(location: string, name: string): string | undefined {
  let base = location;
  for (;;) {
    const candidate = base ? `${base}/node_modules/${name}` : `node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!base) return undefined;
    const cut = base.lastIndexOf('/node_modules/');
    base = cut === -1 ? '' : base.slice(0, cut);
  }
}

describe('package-lock.json', () => {
  it('locks every optional dependency of every locked package, for every platform', () => {
    const missing: string[] = [];
    for (const [location, entry] of Object.entries(lock.packages)) {
      for (const name of Object.keys(entry.optionalDependencies ?? {})) {
        if (!resolveLocation(location, name)) missing.push(`${location || '(root)'} -> ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('detects a missing platform build', () => {
    const location = 'node_modules/@swc/core';
    const names = Object.keys(lock.packages[location]?.optionalDependencies ?? {});
    expect(names.length).toBeGreaterThan(1);
    expect(names.every((name) => resolveLocation(location, name))).toBe(true);
    expect(resolveLocation(location, '@swc/core-not-a-platform')).toBeUndefined();
  });
});
