import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../../../src/config/config-error';
import { loadConfig } from '../../../src/config/load-config';
import { tempDir } from '../../support/temp-dir';

const KEY = Buffer.alloc(32, 7).toString('base64');
const upstreamEnv = {
  UPSTREAM_BASE_URL: 'https://api.payments.example.com',
  UPSTREAM_USERNAME: 'merchant-user',
  UPSTREAM_PASSWORD: 'S3cret-Passw0rd!',
};

function problemsOf(env: NodeJS.ProcessEnv): { variable: string; message: string }[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('starts in local mode with no environment at all', () => {
    const config = loadConfig({});
    expect(config.mode).toBe('local');
    expect(config.server.port).toBe(8080);
    expect(config.server.host).toBe('127.0.0.1');
    expect(config.redis.topology.kind).toBe('none');
    expect(config.callers.clientsFile).toMatch(/config\/clients\.local\.json$/);
    expect(config.upstream.timeoutMs).toBe(10_000);
    expect(config.tokens.refreshSkewSeconds).toBe(60);
    expect(config.server.bodyLimitBytes).toBe(16 * 1024);
  });

  it('uses the upstream and the production registry when UPSTREAM_BASE_URL is set', () => {
    const config = loadConfig({ ...upstreamEnv, REDIS_URL: 'redis://127.0.0.1:6379' });
    expect(config.mode).toBe('upstream');
    expect(config.upstream.baseUrl).toBe('https://api.payments.example.com');
    expect(config.server.host).toBe('0.0.0.0');
    expect(config.callers.clientsFile).toMatch(/config\/clients\.json$/);
    expect(config.redis.topology).toEqual({ kind: 'standalone', url: 'redis://127.0.0.1:6379' });
  });

  it('is frozen', () => {
    const config = loadConfig({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.server)).toBe(true);
  });

  it('names every bad variable at once', () => {
    const problems = problemsOf({
      PORT: 'eighty',
      LOG_LEVEL: 'loud',
      UPSTREAM_TIMEOUT_MS: '-5',
      REDIS_URL: 'http://not-redis',
      UPSTREAM_ALLOW_HTTP: 'maybe',
    });
    expect(problems.map((p) => p.variable).sort()).toEqual(
      ['LOG_LEVEL', 'PORT', 'REDIS_URL', 'UPSTREAM_ALLOW_HTTP', 'UPSTREAM_TIMEOUT_MS'].sort(),
    );
  });

  it('never echoes a secret value in its messages', () => {
    const secret = 'not-base64-but-very-secret-value!!';
    let message = '';
    try {
      loadConfig({ ...upstreamEnv, TOKEN_ENCRYPTION_KEY: secret, PORT: 'x' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('TOKEN_ENCRYPTION_KEY');
    expect(message).toContain('PORT');
    expect(message).not.toContain(secret);
    expect(message).not.toContain(upstreamEnv.UPSTREAM_PASSWORD);
  });

  it('requires https for the upstream unless UPSTREAM_ALLOW_HTTP is set', () => {
    expect(problemsOf({ ...upstreamEnv, UPSTREAM_BASE_URL: 'http://127.0.0.1:4010' })).toEqual([
      expect.objectContaining({ variable: 'UPSTREAM_BASE_URL' }),
    ]);
    expect(
      loadConfig({ ...upstreamEnv, UPSTREAM_BASE_URL: 'http://127.0.0.1:4010', UPSTREAM_ALLOW_HTTP: 'true' })
        .upstream.baseUrl,
    ).toBe('http://127.0.0.1:4010');
  });

  it('requires credentials with an upstream', () => {
    const problems = problemsOf({ UPSTREAM_BASE_URL: 'https://api.payments.example.com' });
    expect(problems.map((p) => p.variable).sort()).toEqual(['UPSTREAM_PASSWORD', 'UPSTREAM_USERNAME']);
  });

  describe('in production', () => {
    it('refuses local mode with a clear message', () => {
      const problems = problemsOf({ NODE_ENV: 'production' });
      expect(problems).toContainEqual(
        expect.objectContaining({
          variable: 'UPSTREAM_BASE_URL',
          message: expect.stringMatching(/production/),
        }),
      );
    });

    it('refuses http upstreams even with UPSTREAM_ALLOW_HTTP', () => {
      const problems = problemsOf({
        ...upstreamEnv,
        NODE_ENV: 'production',
        UPSTREAM_BASE_URL: 'http://api.example.com',
        UPSTREAM_ALLOW_HTTP: 'true',
        ALLOW_MEMORY_STORE: 'true',
      });
      expect(problems).toEqual([expect.objectContaining({ variable: 'UPSTREAM_BASE_URL' })]);
    });

    it('requires TOKEN_ENCRYPTION_KEY with Redis', () => {
      const problems = problemsOf({
        ...upstreamEnv,
        NODE_ENV: 'production',
        REDIS_URL: 'rediss://redis:6380',
      });
      expect(problems).toEqual([expect.objectContaining({ variable: 'TOKEN_ENCRYPTION_KEY' })]);
    });

    it('requires Redis unless ALLOW_MEMORY_STORE=true', () => {
      expect(problemsOf({ ...upstreamEnv, NODE_ENV: 'production' })).toEqual([
        expect.objectContaining({ variable: 'REDIS_URL' }),
      ]);
      expect(
        loadConfig({ ...upstreamEnv, NODE_ENV: 'production', ALLOW_MEMORY_STORE: 'true' }).production,
      ).toBe(true);
    });

    it('accepts a complete production configuration', () => {
      const config = loadConfig({
        ...upstreamEnv,
        NODE_ENV: 'production',
        REDIS_URL: 'rediss://redis:6380',
        TOKEN_ENCRYPTION_KEY: KEY,
      });
      expect(config.tokens.encryptionKey?.length).toBe(32);
    });
  });

  it('reads secrets from *_FILE variables', () => {
    const dir = tempDir('cfg-');
    writeFileSync(join(dir, 'user'), 'file-user\n');
    writeFileSync(join(dir, 'pass'), 'file-pass\n');
    writeFileSync(join(dir, 'key'), `${KEY}\n`);
    const config = loadConfig({
      UPSTREAM_BASE_URL: 'https://api.example.com',
      UPSTREAM_USERNAME_FILE: join(dir, 'user'),
      UPSTREAM_PASSWORD_FILE: join(dir, 'pass'),
      TOKEN_ENCRYPTION_KEY_FILE: join(dir, 'key'),
    });
    expect(config.credentials.username).toBe('file-user');
    expect(config.credentials.password).toBe('file-pass');
    expect(config.credentials.passwordFile).toBe(join(dir, 'pass'));
    expect(config.tokens.encryptionKey?.equals(Buffer.alloc(32, 7))).toBe(true);
  });

  it('refuses an unreadable *_FILE and a secret given twice', () => {
    const problems = problemsOf({
      ...upstreamEnv,
      UPSTREAM_PASSWORD_FILE: '/nonexistent/password',
    });
    expect(problems).toContainEqual(expect.objectContaining({ variable: 'UPSTREAM_PASSWORD' }));
    const unreadable = problemsOf({
      UPSTREAM_BASE_URL: 'https://api.example.com',
      UPSTREAM_USERNAME: 'u',
      UPSTREAM_PASSWORD_FILE: '/nonexistent/password',
    });
    expect(unreadable).toContainEqual(expect.objectContaining({ variable: 'UPSTREAM_PASSWORD_FILE' }));
  });

  it('parses Redis Sentinel and Cluster topologies and refuses two at once', () => {
    expect(
      loadConfig({ REDIS_SENTINELS: 'a:26379, b:26379', REDIS_SENTINEL_NAME: 'mymaster' }).redis.topology,
    ).toEqual({
      kind: 'sentinel',
      name: 'mymaster',
      sentinels: [
        { host: 'a', port: 26379 },
        { host: 'b', port: 26379 },
      ],
    });
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'n1:7000,n2:7001' }).redis.topology).toEqual({
      kind: 'cluster',
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 7001 },
      ],
    });
    expect(problemsOf({ REDIS_SENTINELS: 'a:26379' })).toEqual([
      expect.objectContaining({ variable: 'REDIS_SENTINEL_NAME' }),
    ]);
    expect(problemsOf({ REDIS_URL: 'redis://x:6379', REDIS_CLUSTER_NODES: 'n1:7000' })).toHaveLength(1);
  });

  it('refuses TRUST_PROXY=true but takes hop counts and CIDRs', () => {
    expect(problemsOf({ TRUST_PROXY: 'true' })).toEqual([
      expect.objectContaining({ variable: 'TRUST_PROXY' }),
    ]);
    expect(loadConfig({ TRUST_PROXY: '2' }).server.trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, loopback' }).server.trustProxy).toEqual([
      '10.0.0.0/8',
      'loopback',
    ]);
    expect(problemsOf({ INBOUND_ALLOW_CIDRS: '10.0.0.0/8,not-a-cidr' })).toEqual([
      expect.objectContaining({ variable: 'INBOUND_ALLOW_CIDRS' }),
    ]);
  });

  it('parses static upstream headers and refuses ones the gateway owns', () => {
    expect(
      loadConfig({ UPSTREAM_STATIC_HEADERS: 'x-version: LPV3; X-Channel: web' }).upstream.staticHeaders,
    ).toEqual({
      'x-version': 'LPV3',
      'x-channel': 'web',
    });
    expect(loadConfig({ UPSTREAM_STATIC_HEADERS: '{"x-version":"LPV3"}' }).upstream.staticHeaders).toEqual({
      'x-version': 'LPV3',
    });
    expect(problemsOf({ UPSTREAM_STATIC_HEADERS: 'Authorization: Bearer x' })).toEqual([
      expect.objectContaining({ variable: 'UPSTREAM_STATIC_HEADERS' }),
    ]);
  });

  it('requires OIDC_ISSUER and OIDC_AUDIENCE together', () => {
    expect(problemsOf({ OIDC_ISSUER: 'https://sso.example.com' })).toEqual([
      expect.objectContaining({ variable: 'OIDC_AUDIENCE' }),
    ]);
    expect(
      loadConfig({ OIDC_ISSUER: 'https://sso.example.com', OIDC_AUDIENCE: 'payments-bff' }).callers.oidc,
    ).toMatchObject({ issuer: 'https://sso.example.com', audience: 'payments-bff' });
  });

  it('limits failed authentications per IP: 20 per 5 min by default, a zero or a typo refused by name', () => {
    expect(loadConfig({}).callers.authFailureLimit).toEqual({ limit: 20, windowSeconds: 300 });
    expect(
      loadConfig({ AUTH_FAILURE_LIMIT: '5', AUTH_FAILURE_WINDOW_SECONDS: '60' }).callers.authFailureLimit,
    ).toEqual({ limit: 5, windowSeconds: 60 });
    expect(
      problemsOf({ AUTH_FAILURE_LIMIT: '0', AUTH_FAILURE_WINDOW_SECONDS: '5m' })
        .map((p) => p.variable)
        .sort(),
    ).toEqual(['AUTH_FAILURE_LIMIT', 'AUTH_FAILURE_WINDOW_SECONDS']);
  });
});
