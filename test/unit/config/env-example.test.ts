import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { envSchema } from '../../../src/config/env-schema';
import { simulatorEnvSchema } from '../../../src/simulator/simulator-config';

const example = readFileSync(resolve(__dirname, '../../../.env.example'), 'utf8');
const documented = new Set([...example.matchAll(/^([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]));

describe('.env.example', () => {
  it('documents every variable the gateway reads', () => {
    const missing = Object.keys(envSchema.shape).filter((name) => !documented.has(name));
    expect(missing).toEqual([]);
  });

  it('documents every simulator variable', () => {
    const missing = Object.keys(simulatorEnvSchema.shape).filter((name) => !documented.has(name));
    expect(missing).toEqual([]);
  });

  it('documents nothing the gateway does not read', () => {
    const known = new Set([...Object.keys(envSchema.shape), ...Object.keys(simulatorEnvSchema.shape)]);
    expect([...documented].filter((name) => !known.has(name as string))).toEqual([]);
  });

  it('holds no secret value', () => {
    for (const name of ['UPSTREAM_PASSWORD', 'UPSTREAM_USERNAME', 'TOKEN_ENCRYPTION_KEY', 'REDIS_PASSWORD']) {
      expect(example).toMatch(new RegExp(`^${name}=$`, 'm'));
    }
  });
});
