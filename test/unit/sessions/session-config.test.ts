// SESSION_* variables: refused when incomplete or unsafe, and production never loads the development provider.
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { ConfigError } from '../../../src/config/config-error';
import { loadConfig } from '../../../src/config/load-config';

const upstream = {
  UPSTREAM_BASE_URL: 'https://api.example.test',
  UPSTREAM_USERNAME: 'user',
  UPSTREAM_PASSWORD: 'password',
  NODE_ENV: 'test',
};
const sessions = {
  SESSION_ISSUER: 'https://login.example.test',
  SESSION_CLIENT_ID: 'payments-console',
  SESSION_CLIENT_SECRET: 'client-secret-value',
  SESSION_PUBLIC_URL: 'https://bff.example.test/',
};

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.message.split('\n');
  }
}

describe('browser session settings', () => {
  it('are off in upstream mode without SESSION_ISSUER, and on in local mode with the development client', () => {
    expect(loadConfig(upstream).sessions).toBeUndefined();
    expect(loadConfig({ NODE_ENV: 'development' }).sessions).toMatchObject({
      issuer: undefined,
      clientId: 'local-web-app',
      idleTimeoutSeconds: 1800,
      maxLifetimeSeconds: 43_200,
      revalidateSeconds: 300,
    });
  });

  it('read the issuer, client and public origin (a trailing slash is no path)', () => {
    expect(loadConfig({ ...upstream, ...sessions }).sessions).toMatchObject({
      issuer: 'https://login.example.test',
      clientId: 'payments-console',
      publicUrl: 'https://bff.example.test',
      scopes: 'openid profile email',
    });
  });

  it.each([
    [{ SESSION_CLIENT_ID: '' }, 'SESSION_CLIENT_ID'],
    [{ SESSION_CLIENT_SECRET: '' }, 'SESSION_CLIENT_SECRET'],
    [{ SESSION_PUBLIC_URL: '' }, 'SESSION_PUBLIC_URL'],
    [{ SESSION_PUBLIC_URL: 'ftp://bff.example.test' }, 'SESSION_PUBLIC_URL'],
    [{ SESSION_SCOPES: 'profile email' }, 'SESSION_SCOPES'],
    [
      { SESSION_IDLE_TIMEOUT_SECONDS: '7200', SESSION_MAX_LIFETIME_SECONDS: '3600' },
      'SESSION_IDLE_TIMEOUT_SECONDS',
    ],
    [{ SESSION_REVALIDATE_SECONDS: '0' }, 'SESSION_REVALIDATE_SECONDS'],
    [{ SESSION_CLIENT_ID: 'has spaces' }, 'SESSION_CLIENT_ID'],
    // The gateway owns its origin (/bff/* at its root, a __Host- cookie for Path=/): a path was silently dropped.
    [{ SESSION_PUBLIC_URL: 'https://bff.example.test/payments' }, 'SESSION_PUBLIC_URL'],
    [{ SESSION_PUBLIC_URL: 'https://bff.example.test/payments/' }, 'SESSION_PUBLIC_URL'],
    [{ SESSION_PUBLIC_URL: 'https://bff.example.test/?x=1' }, 'SESSION_PUBLIC_URL'],
    [{ SESSION_PUBLIC_URL: 'https://bff.example.test/#top' }, 'SESSION_PUBLIC_URL'],
    [{ SESSION_PUBLIC_URL: 'https://user:pass@bff.example.test' }, 'SESSION_PUBLIC_URL'],
  ])('refuse %j naming %s', (change, variable) => {
    expect(problems({ ...upstream, ...sessions, ...change }).join('\n')).toContain(variable);
  });

  it.each([
    ['SESSION_IDLE_TIMEOUT', 'SESSION_IDLE_TIMEOUT_SECONDS'],
    ['SESSION_MAX_LIFETIME', 'SESSION_MAX_LIFETIME_SECONDS'],
    ['SESSION_REVALIDATE_SECONDS_', 'SESSION_REVALIDATE_SECONDS'],
    ['SESSION_CLIENTID', 'SESSION_CLIENT_ID'],
    ['SESSION_SCOPE', 'SESSION_SCOPES'],
    ['SESSION_PUBLIC_ULR', 'SESSION_PUBLIC_URL'],
    ['SESSION_ISSUER_URL', 'SESSION_ISSUER'],
  ])('refuse the misspelled %s, naming %s (its default would stay on without a word)', (typo, meant) => {
    const found = problems({ ...upstream, ...sessions, [typo]: '60' }).join('\n');
    expect(found).toContain(typo);
    expect(found).toContain(meant);
    expect(found).not.toContain('60');
  });

  it('leave alone variables that merely share the prefix (a desktop session manager)', () => {
    expect(problems({ ...upstream, ...sessions, SESSION_MANAGER: 'local/host:@/tmp/.ICE-unix/1' })).toEqual(
      [],
    );
  });

  it('refuse a client id or secret without an issuer', () => {
    expect(problems({ ...upstream, SESSION_CLIENT_ID: 'x' }).join('\n')).toContain('SESSION_ISSUER');
  });

  it('refuse plain http in production, and never echo the client secret', () => {
    const production = {
      ...upstream,
      ...sessions,
      NODE_ENV: 'production',
      ALLOW_MEMORY_STORE: 'true',
      METRICS_ON_MAIN_PORT: 'true',
    };
    const found = problems({
      ...production,
      SESSION_ISSUER: 'http://login.example.test',
      SESSION_PUBLIC_URL: 'http://bff.example.test',
    });
    expect(found.join('\n')).toContain('SESSION_ISSUER');
    expect(found.join('\n')).toContain('SESSION_PUBLIC_URL');
    // Sessions in a shared Redis hold refresh tokens: never unsealed in production.
    expect(
      problems({ ...production, ALLOW_MEMORY_STORE: 'false', REDIS_URL: 'rediss://redis:6380' }).join('\n'),
    ).toContain('TOKEN_ENCRYPTION_KEY');
    expect(problems({ ...upstream, ...sessions, SESSION_CLIENT_SECRET: '' }).join('\n')).not.toContain(
      'client-secret-value',
    );
  });
});

describe('production start-up', () => {
  it('never loads the development identity provider, oidc-provider or the local web app', () => {
    const root = resolve(__dirname, '../../..');
    const script = `
      require('./src/gateway');
      const loaded = Object.keys(require.cache).filter((m) => /dev-identity-provider|dev-web-app|oidc-provider/.test(m));
      process.stdout.write(JSON.stringify(loaded));`;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual([]);
  });
});
