// The Node.js flags the gateway runs with in production: package.json's config.nodeFlags, which `npm start` and the
// Dockerfile's CMD spell out (test/integration/operations/container-files.test.ts holds both to it). The bench
// starts every gateway with its own build's flags, so a build is measured as it ships and an older build without
// them as it shipped.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The flags of the checkout at `build` (its package.json's config.nodeFlags), split; none when it sets none. */
export function gatewayNodeFlags(build: string): string[] {
  const manifest = JSON.parse(readFileSync(join(build, 'package.json'), 'utf8')) as {
    config?: { nodeFlags?: unknown };
  };
  const flags = manifest.config?.nodeFlags;
  if (flags === undefined) return [];
  if (typeof flags !== 'string') throw new Error(`${build}/package.json: config.nodeFlags is not a string`);
  return flags.split(/\s+/).filter(Boolean);
}
