import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gatewayNodeFlags } from '../../../bench/lib/gateway-node-flags';
import { tempDir } from '../../support/temp-dir';

const ROOT = resolve(__dirname, '..', '..', '..');
const MIB = 1024 * 1024;

function checkoutWith(manifest: object): string {
  const dir = tempDir('node-flags-');
  writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest));
  return dir;
}

describe('gatewayNodeFlags', () => {
  test("this checkout's flags are package.json's config.nodeFlags, split", () => {
    expect(gatewayNodeFlags(ROOT)).toEqual(['--min-semi-space-size=64', '--max-semi-space-size=64']);
  });

  test('a build whose package.json sets none (an older build) runs with none', () => {
    expect(gatewayNodeFlags(checkoutWith({ name: 'old', config: {} }))).toEqual([]);
    expect(gatewayNodeFlags(checkoutWith({ name: 'older' }))).toEqual([]);
  });

  test('extra spaces are not flags; a non-string value is refused, not guessed at', () => {
    expect(gatewayNodeFlags(checkoutWith({ config: { nodeFlags: '  --a=1   --b ' } }))).toEqual([
      '--a=1',
      '--b',
    ]);
    expect(() => gatewayNodeFlags(checkoutWith({ config: { nodeFlags: ['--a=1'] } }))).toThrow(
      /config.nodeFlags is not a string/,
    );
  });

  test("the project's Node accepts the flags and starts with a young generation of 64 MiB per semi-space", () => {
    const newSpace = execFileSync(
      process.execPath,
      [
        ...gatewayNodeFlags(ROOT),
        '-p',
        "require('v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size",
      ],
      { encoding: 'utf8' },
    );
    expect(Number(newSpace)).toBe(64 * MIB);
    // Without them V8 starts at 1 MiB and grows and shrinks it under load (bench/README.md, "sixth").
    const byDefault = execFileSync(
      process.execPath,
      ['-p', "require('v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size"],
      { encoding: 'utf8' },
    );
    expect(Number(byDefault)).toBeLessThan(64 * MIB);
  });
});
