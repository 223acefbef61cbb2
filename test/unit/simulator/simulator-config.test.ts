import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../../../src/config/config-error';
import {
  loadSimulatorConfig,
  SIMULATOR_DEFAULT_PASSWORD,
  SIMULATOR_DEFAULT_USERNAME,
} from '../../../src/simulator/simulator-config';
import { tempDir } from '../../support/temp-dir';

describe('loadSimulatorConfig', () => {
  it('uses the documented defaults when nothing is set', () => {
    expect(loadSimulatorConfig({})).toEqual({
      host: '127.0.0.1',
      port: 4010,
      username: SIMULATOR_DEFAULT_USERNAME,
      password: SIMULATOR_DEFAULT_PASSWORD,
      accessTtlSeconds: 300,
      refreshTtlSeconds: 86_400,
      allowedIps: [],
      rotateRefresh: false,
    });
    expect(SIMULATOR_DEFAULT_USERNAME).toBe('sandbox-merchant');
    expect(SIMULATOR_DEFAULT_PASSWORD).toBe('sandbox-password');
  });

  it('reads every variable', () => {
    const options = loadSimulatorConfig({
      SIMULATOR_HOST: '0.0.0.0',
      SIMULATOR_PORT: '0',
      SIMULATOR_USERNAME: 'merchant',
      SIMULATOR_PASSWORD: 's3cret',
      SIMULATOR_ACCESS_TTL_SECONDS: '5',
      SIMULATOR_REFRESH_TTL_SECONDS: '60',
      SIMULATOR_ALLOWED_IPS: ' 10.0.0.1, ::ffff:127.0.0.1 ,::1,',
      SIMULATOR_ROTATE_REFRESH: 'true',
    });
    expect(options).toEqual({
      host: '0.0.0.0',
      port: 0,
      username: 'merchant',
      password: 's3cret',
      accessTtlSeconds: 5,
      refreshTtlSeconds: 60,
      allowedIps: ['10.0.0.1', '127.0.0.1', '::1'],
      rotateRefresh: true,
    });
    expect(Object.isFrozen(options)).toBe(true);
  });

  it('treats empty variables as unset', () => {
    expect(loadSimulatorConfig({ SIMULATOR_PORT: '', SIMULATOR_PASSWORD: ' ' }).port).toBe(4010);
  });

  it('names every bad variable and never echoes the password', () => {
    const env = {
      SIMULATOR_PORT: '70000',
      SIMULATOR_ACCESS_TTL_SECONDS: '0',
      SIMULATOR_REFRESH_TTL_SECONDS: 'soon',
      SIMULATOR_ALLOWED_IPS: '10.0.0.1,not-an-ip',
      SIMULATOR_ROTATE_REFRESH: 'maybe',
    };
    let error: unknown;
    try {
      loadSimulatorConfig({ ...env, SIMULATOR_PASSWORD: 'hunter2-secret' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const name of Object.keys(env)) expect(message).toContain(name);
    expect(message).not.toContain('hunter2-secret');
    expect(message).not.toContain('not-an-ip');
    expect(message).not.toContain('SIMULATOR_PASSWORD');
  });

  it('reads SIMULATOR_TLS_CERT_FILE and SIMULATOR_TLS_KEY_FILE together, or refuses', () => {
    const dir = tempDir('bff-sim-tls-');
    writeFileSync(join(dir, 'cert.pem'), 'CERT');
    writeFileSync(join(dir, 'key.pem'), 'KEY');
    expect(
      loadSimulatorConfig({
        SIMULATOR_TLS_CERT_FILE: join(dir, 'cert.pem'),
        SIMULATOR_TLS_KEY_FILE: join(dir, 'key.pem'),
      }).tls,
    ).toEqual({ cert: 'CERT', key: 'KEY' });
    expect(loadSimulatorConfig({}).tls).toBeUndefined();
    const problems = (env: NodeJS.ProcessEnv) => {
      try {
        loadSimulatorConfig(env);
      } catch (error) {
        return (error as ConfigError).problems.map((p) => p.variable);
      }
      return [];
    };
    expect(problems({ SIMULATOR_TLS_CERT_FILE: join(dir, 'cert.pem') })).toEqual(['SIMULATOR_TLS_KEY_FILE']);
    expect(
      problems({
        SIMULATOR_TLS_CERT_FILE: join(dir, 'missing.pem'),
        SIMULATOR_TLS_KEY_FILE: join(dir, 'key.pem'),
      }),
    ).toEqual(['SIMULATOR_TLS_CERT_FILE']);
  });

  it('reads further merchant accounts from SIMULATOR_EXTRA_ACCOUNTS', () => {
    const options = loadSimulatorConfig({
      SIMULATOR_EXTRA_ACCOUNTS: JSON.stringify([
        { username: 'merchant-b', password: 'password-b' },
        { username: ' merchant-c ', password: 'password-c' },
      ]),
    });
    expect(options.extraAccounts).toEqual([
      { username: 'merchant-b', password: 'password-b' },
      { username: 'merchant-c', password: 'password-c' },
    ]);
    expect(Object.isFrozen(options.extraAccounts)).toBe(true);
    expect(loadSimulatorConfig({ SIMULATOR_EXTRA_ACCOUNTS: '' }).extraAccounts).toBeUndefined();
  });

  it('refuses a malformed SIMULATOR_EXTRA_ACCOUNTS, naming it and never echoing a password', () => {
    const refused = [
      '{not json hunter2-secret',
      JSON.stringify({ username: 'merchant-b', password: 'hunter2-secret' }),
      JSON.stringify([{ username: 'merchant-b' }]),
      JSON.stringify([{ username: 'merchant-b', password: 'hunter2-secret', extra: 1 }]),
      JSON.stringify([
        { username: 'merchant-b', password: 'hunter2-secret' },
        { username: 'merchant-b', password: 'other' },
      ]),
      // The main account's username again: two accounts could not be told apart.
      JSON.stringify([{ username: 'sandbox-merchant', password: 'hunter2-secret' }]),
    ];
    for (const value of refused) {
      let error: unknown;
      try {
        loadSimulatorConfig({ SIMULATOR_EXTRA_ACCOUNTS: value });
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.map((p) => p.variable)).toEqual(['SIMULATOR_EXTRA_ACCOUNTS']);
      expect((error as Error).message).not.toContain('hunter2-secret');
    }
  });
});
