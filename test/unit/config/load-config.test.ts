import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { envSchema } from '../../../src/config/env-schema';
import { loadConfig } from '../../../src/config/load-config';
import { problemsOf } from '../../support/config-problems';
import { tempDir } from '../../support/temp-dir';
import { createTestPki, type TestPki } from '../../support/test-certificates';

/** The variables documented as fractions; every other numeric variable is a whole number. */
const RATIOS = ['CIRCUIT_FAILURE_RATIO', 'OTEL_TRACES_SAMPLER_ARG'];
const KEY = Buffer.alloc(32, 7).toString('base64');
const upstreamEnv = {
  UPSTREAM_BASE_URL: 'https://api.payments.example.com',
  UPSTREAM_USERNAME: 'merchant-user',
  UPSTREAM_PASSWORD: 'S3cret-Passw0rd!',
};
/** An upstream outside production: NODE_ENV must say so (unset with an upstream is production). */
const testEnv = { ...upstreamEnv, NODE_ENV: 'test' } as const;
/** Everything production asks for besides the upstream. */
const productionReady = {
  REDIS_URL: 'rediss://redis:6380',
  TOKEN_ENCRYPTION_KEY: KEY,
  METRICS_PORT: '9464',
};

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
    const config = loadConfig({ ...testEnv, REDIS_URL: 'redis://127.0.0.1:6379' });
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

  it('bounds the wait for an upstream socket: 1 s and 1024 sockets by default, 0 allowed, typos refused by name', () => {
    expect(loadConfig({}).upstream).toMatchObject({ maxSockets: 1024, queueTimeoutMs: 1_000 });
    expect(loadConfig({ UPSTREAM_QUEUE_TIMEOUT_MS: '0' }).upstream.queueTimeoutMs).toBe(0);
    for (const typo of ['1s', '-1', '1.5', '600000'])
      expect(problemsOf({ UPSTREAM_QUEUE_TIMEOUT_MS: typo }).map((p) => p.variable)).toEqual([
        'UPSTREAM_QUEUE_TIMEOUT_MS',
      ]);
  });

  it('refuses a number made of blanks instead of reading it as 0 (UPSTREAM_QUEUE_TIMEOUT_MS=" " is not "never wait")', () => {
    for (const variable of ['UPSTREAM_QUEUE_TIMEOUT_MS', 'PORT', 'METRICS_PORT', 'OTEL_TRACES_SAMPLER_ARG'])
      for (const blank of [' ', '\t', '  \n'])
        expect(problemsOf({ [variable]: blank })).toEqual([
          { variable, message: expect.stringMatching(/must be a number in plain decimal digits/) },
        ]);
  });

  const integerVariables = Object.entries(envSchema.shape)
    // Numeric: refuses a word but takes some plain number (ranges differ, so several are tried).
    .filter(
      ([, schema]) =>
        !schema.safeParse('5x').success &&
        ['5', '100', '1000', '60000', '300000'].some((n) => schema.safeParse(n).success),
    )
    .map(([name]) => name)
    .filter((name) => !RATIOS.includes(name) && name !== 'TRUST_PROXY');

  it('finds every integer variable of the schema to try the spellings on', () => {
    // The filter above is what the next test relies on: a numeric variable it missed would go untried.
    expect(integerVariables).toEqual(expect.arrayContaining(['PORT', 'SESSION_REVALIDATE_SECONDS']));
    expect(integerVariables.length).toBeGreaterThanOrEqual(28);
  });

  it('takes plain decimal digits only: hex, exponents, leading zeros, signs, blanks, fractions get one message', () => {
    const spellings = [
      '0x10',
      '1e3',
      '010',
      '+5',
      ' 5',
      '5 ',
      '5.0',
      '-0',
      '0b1',
      '0o7',
      '10_000',
      'Infinity',
      '5x',
    ];
    for (const variable of integerVariables)
      for (const spelling of spellings)
        expect([variable, problemsOf({ [variable]: spelling })]).toEqual([
          variable,
          [{ variable, message: 'must be a number in plain decimal digits, like 5000' }],
        ]);
    expect(loadConfig({ SHUTDOWN_TIMEOUT_MS: '1000' }).server.shutdownTimeoutMs).toBe(1000);
    expect(loadConfig({ PLAN_CACHE_TTL_SECONDS: '0' }).upstream.planCacheTtlSeconds).toBe(0);
  });

  it('takes the documented ratios as plain decimals (0.5, 1), nothing else, with the same message', () => {
    for (const variable of RATIOS)
      for (const spelling of ['.25', '0.5e0', '5e-1', '+0.5', ' 0.5', '0x1', '00.5', '0.', '1/2', 'Infinity'])
        expect([spelling, problemsOf({ [variable]: spelling })]).toEqual([
          spelling,
          [{ variable, message: 'must be a number in plain decimal digits, like 0.5' }],
        ]);
    expect(loadConfig({ CIRCUIT_FAILURE_RATIO: '0.25' }).upstream.circuit.failureRatio).toBe(0.25);
    const traced = {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_TRACES_SAMPLER: 'traceidratio',
    };
    expect(loadConfig({ ...traced, OTEL_TRACES_SAMPLER_ARG: '1' }).tracing?.samplerRatio).toBe(1);
    expect(loadConfig({ ...traced, OTEL_TRACES_SAMPLER_ARG: '0.125' }).tracing?.samplerRatio).toBe(0.125);
  });

  it('takes Redis node ports in plain digits, 1 to 65535', () => {
    for (const nodes of ['r1:0x1a0b', 'r1:06379', 'r1:+6379', 'r1:70000', 'r1:0'])
      expect(problemsOf({ REDIS_CLUSTER_NODES: nodes }).map((p) => p.variable)).toEqual([
        'REDIS_CLUSTER_NODES',
      ]);
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:6379,r2:65535' }).redis.topology.kind).toBe('cluster');
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

  it('reads the circuit settings, with defaults', () => {
    expect(loadConfig(testEnv).upstream.circuit).toEqual({
      failureRatio: 0.5,
      windowMs: 10_000,
      minimumCalls: 20,
      resetMs: 10_000,
    });
    const tuned = loadConfig({ ...testEnv, CIRCUIT_FAILURE_RATIO: '0.8', CIRCUIT_MINIMUM_CALLS: '50' });
    expect(tuned.upstream.circuit).toMatchObject({ failureRatio: 0.8, minimumCalls: 50 });
  });

  it('refuses a failure ratio outside (0, 1), and names the replaced CIRCUIT_FAILURE_THRESHOLD', () => {
    expect(problemsOf({ ...testEnv, CIRCUIT_FAILURE_RATIO: '1' }).map((p) => p.variable)).toEqual([
      'CIRCUIT_FAILURE_RATIO',
    ]);
    expect(problemsOf({ ...testEnv, CIRCUIT_FAILURE_RATIO: '50%' }).map((p) => p.variable)).toEqual([
      'CIRCUIT_FAILURE_RATIO',
    ]);
    const [replaced, ...rest] = problemsOf({ ...testEnv, CIRCUIT_FAILURE_THRESHOLD: '5' });
    expect(rest).toEqual([]);
    expect(replaced?.variable).toBe('CIRCUIT_FAILURE_THRESHOLD');
    expect(replaced?.message).toContain('CIRCUIT_FAILURE_RATIO');
  });

  it('requires https for the upstream unless UPSTREAM_ALLOW_HTTP is set', () => {
    expect(problemsOf({ ...testEnv, UPSTREAM_BASE_URL: 'http://127.0.0.1:4010' })).toEqual([
      expect.objectContaining({ variable: 'UPSTREAM_BASE_URL' }),
    ]);
    expect(
      loadConfig({ ...testEnv, UPSTREAM_BASE_URL: 'http://127.0.0.1:4010', UPSTREAM_ALLOW_HTTP: 'true' })
        .upstream.baseUrl,
    ).toBe('http://127.0.0.1:4010');
  });

  it('requires credentials with an upstream', () => {
    const problems = problemsOf({ UPSTREAM_BASE_URL: 'https://api.payments.example.com', NODE_ENV: 'test' });
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
        ...productionReady,
        NODE_ENV: 'production',
        UPSTREAM_BASE_URL: 'http://api.example.com',
        UPSTREAM_ALLOW_HTTP: 'true',
      });
      expect(problems).toEqual([expect.objectContaining({ variable: 'UPSTREAM_BASE_URL' })]);
    });

    it('requires TOKEN_ENCRYPTION_KEY with Redis', () => {
      const problems = problemsOf({
        ...upstreamEnv,
        ...productionReady,
        NODE_ENV: 'production',
        TOKEN_ENCRYPTION_KEY: '',
      });
      expect(problems).toEqual([expect.objectContaining({ variable: 'TOKEN_ENCRYPTION_KEY' })]);
    });

    it('requires Redis unless ALLOW_MEMORY_STORE=true', () => {
      const noRedis = { ...upstreamEnv, NODE_ENV: 'production', METRICS_PORT: '9464' };
      expect(problemsOf(noRedis)).toEqual([expect.objectContaining({ variable: 'REDIS_URL' })]);
      expect(loadConfig({ ...noRedis, ALLOW_MEMORY_STORE: 'true' }).production).toBe(true);
    });

    it('refuses a login back-off minimum below 5 s (and accepts 5 s)', () => {
      const env = { ...upstreamEnv, ...productionReady, NODE_ENV: 'production' };
      expect(problemsOf({ ...env, TOKEN_LOGIN_MIN_INTERVAL_MS: '4999' })).toEqual([
        expect.objectContaining({
          variable: 'TOKEN_LOGIN_MIN_INTERVAL_MS',
          message: expect.stringMatching(/5000/),
        }),
      ]);
      expect(loadConfig({ ...env, TOKEN_LOGIN_MIN_INTERVAL_MS: '5000' }).tokens.loginMinIntervalMs).toBe(
        5_000,
      );
    });

    it('refuses a longest login wait below 15 min (a wrong password would cost thousands of logins a day)', () => {
      const env = { ...upstreamEnv, ...productionReady, NODE_ENV: 'production' };
      expect(
        problemsOf({ ...env, TOKEN_LOGIN_MIN_INTERVAL_MS: '5000', TOKEN_LOGIN_MAX_INTERVAL_MS: '5000' }),
      ).toEqual([expect.objectContaining({ variable: 'TOKEN_LOGIN_MAX_INTERVAL_MS' })]);
      expect(loadConfig({ ...env, TOKEN_LOGIN_MAX_INTERVAL_MS: '3600000' }).tokens.loginMaxIntervalMs).toBe(
        3_600_000,
      );
      expect(loadConfig({ ...testEnv, TOKEN_LOGIN_MAX_INTERVAL_MS: '30000' }).tokens.loginMaxIntervalMs).toBe(
        30_000,
      );
    });

    it('accepts a complete production configuration', () => {
      const config = loadConfig({ ...upstreamEnv, ...productionReady, NODE_ENV: 'production' });
      expect(config.tokens.encryptionKey?.length).toBe(32);
      expect(config.server.metricsOnMainPort).toBe(false);
    });
  });

  describe('secure by default: an upstream with NODE_ENV unset is production', () => {
    it('applies the production rules, and says why in each refusal', () => {
      const problems = problemsOf({ ...upstreamEnv, UPSTREAM_BASE_URL: 'http://api.example.com' });
      expect(problems.map((p) => p.variable).sort()).toEqual([
        'METRICS_PORT',
        'REDIS_URL',
        'UPSTREAM_BASE_URL',
      ]);
      for (const problem of problems) expect(problem.message).toMatch(/NODE_ENV=development or test/);
      expect(loadConfig({ ...upstreamEnv, ...productionReady }).production).toBe(true);
    });

    it('only an explicit development or test opts out; local mode stays non-production', () => {
      for (const NODE_ENV of ['development', 'test'])
        expect(loadConfig({ ...upstreamEnv, NODE_ENV, REDIS_URL: 'redis://r:6379' }).production).toBe(false);
      expect(loadConfig({}).production).toBe(false);
      expect(loadConfig({ NODE_ENV: '' }).mode).toBe('local');
    });

    it('refuses an http upstream however its scheme is written, and reads HTTPS:// as https', () => {
      // URL schemes are case-insensitive: HTTP:// is plain http and would carry the credentials unencrypted.
      for (const url of ['HTTP://api.example.com', 'Http://api.example.com'])
        expect(problemsOf({ ...upstreamEnv, ...productionReady, UPSTREAM_BASE_URL: url })).toEqual([
          expect.objectContaining({
            variable: 'UPSTREAM_BASE_URL',
            message: expect.stringMatching(/^must be https in production/),
          }),
        ]);
      const config = loadConfig({
        ...upstreamEnv,
        ...productionReady,
        UPSTREAM_BASE_URL: 'HTTPS://Api.Payments.Example.com/',
      });
      expect(config.upstream.baseUrl).toBe('https://api.payments.example.com');
    });

    it('says why in the session refusals too: an operator who never set NODE_ENV learns that production applies', () => {
      const problems = problemsOf({
        ...upstreamEnv,
        ...productionReady,
        SESSION_ISSUER: 'http://login.example.com',
        SESSION_CLIENT_ID: 'payments-console',
        SESSION_CLIENT_SECRET: 'client-secret-value',
        SESSION_PUBLIC_URL: 'http://bff.example.com',
      });
      expect(problems.map((p) => p.variable).sort()).toEqual(['SESSION_ISSUER', 'SESSION_PUBLIC_URL']);
      for (const problem of problems) expect(problem.message).toMatch(/NODE_ENV=development or test/);
    });

    it('refuses http OIDC issuer and JWKS URLs, naming each variable', () => {
      const problems = problemsOf({
        ...upstreamEnv,
        ...productionReady,
        OIDC_ISSUER: 'http://sso.example.com',
        OIDC_AUDIENCE: 'payments-bff',
        OIDC_JWKS_URL: 'http://sso.example.com/jwks',
      });
      expect(problems.map((p) => p.variable).sort()).toEqual(['OIDC_ISSUER', 'OIDC_JWKS_URL']);
      expect(problems[0]?.message).toMatch(/https/);
      const https = {
        OIDC_ISSUER: 'https://sso.example.com',
        OIDC_AUDIENCE: 'payments-bff',
        OIDC_JWKS_URL: 'https://sso.example.com/jwks',
      };
      expect(loadConfig({ ...upstreamEnv, ...productionReady, ...https }).callers.oidc?.jwksUrl).toBe(
        https.OIDC_JWKS_URL,
      );
      expect(
        loadConfig({ ...testEnv, OIDC_ISSUER: 'http://127.0.0.1:9000', OIDC_AUDIENCE: 'x' }).callers.oidc,
      ).toBeDefined();
    });

    it('reads a URL scheme in any case: HTTP:// is still plain http, HTTPS:// still https', () => {
      const production = { ...upstreamEnv, ...productionReady };
      expect(problemsOf({ ...production, UPSTREAM_BASE_URL: 'HTTP://api.payments.example.com' })).toEqual([
        expect.objectContaining({ variable: 'UPSTREAM_BASE_URL' }),
      ]);
      const problems = problemsOf({
        ...production,
        OIDC_ISSUER: 'Http://sso.example.com',
        OIDC_AUDIENCE: 'payments-bff',
        OIDC_JWKS_URL: 'HTTP://sso.example.com/jwks',
      });
      expect(problems.map((p) => p.variable).sort()).toEqual(['OIDC_ISSUER', 'OIDC_JWKS_URL']);
      // The upstream in its canonical form: every consumer (the agent, the token client) sees https.
      const config = loadConfig({
        ...production,
        UPSTREAM_BASE_URL: 'HTTPS://API.Payments.example.com:443/',
      });
      expect(config.upstream.baseUrl).toBe('https://api.payments.example.com');
    });

    it('refuses an upstream URL with a user, a password, a query or a fragment, without echoing it', () => {
      const production = { ...upstreamEnv, ...productionReady };
      for (const url of [
        'https://merchant:hunter2@api.payments.example.com',
        'https://merchant@api.payments.example.com/v1',
        'https://api.payments.example.com/v1?tenant=hunter2',
        'https://api.payments.example.com/v1#hunter2',
      ]) {
        const problems = problemsOf({ ...production, UPSTREAM_BASE_URL: url });
        expect(problems).toEqual([expect.objectContaining({ variable: 'UPSTREAM_BASE_URL' })]);
        expect(JSON.stringify(problems)).not.toContain('hunter2');
      }
      // A path prefix is the provider's base: kept.
      const config = loadConfig({ ...production, UPSTREAM_BASE_URL: 'https://api.payments.example.com/v1/' });
      expect(config.upstream.baseUrl).toBe('https://api.payments.example.com/v1');
    });

    it('needs METRICS_PORT, or an explicit METRICS_ON_MAIN_PORT=true, and not both', () => {
      const env = { ...upstreamEnv, ...productionReady, METRICS_PORT: '' };
      const [problem] = problemsOf(env);
      expect(problem).toMatchObject({ variable: 'METRICS_PORT' });
      expect(problem?.message).toMatch(/set METRICS_PORT.*METRICS_ON_MAIN_PORT=true/);
      expect(loadConfig({ ...env, METRICS_ON_MAIN_PORT: 'true' }).server.metricsOnMainPort).toBe(true);
      expect(problemsOf({ ...env, METRICS_PORT: '9464', METRICS_ON_MAIN_PORT: 'true' })).toEqual([
        expect.objectContaining({ variable: 'METRICS_ON_MAIN_PORT' }),
      ]);
      // Outside production /metrics stays on the main port without asking.
      expect(loadConfig(testEnv).server.metricsOnMainPort).toBe(true);
    });

    it('refuses METRICS_PORT equal to PORT, naming both, instead of failing to listen on an address "in use"', () => {
      expect(problemsOf({ ...upstreamEnv, ...productionReady, PORT: '9464', METRICS_PORT: '9464' })).toEqual([
        {
          variable: 'METRICS_PORT',
          message: expect.stringMatching(/must differ from PORT.*METRICS_ON_MAIN_PORT/),
        },
      ]);
      // Port 0 asks the system for a free port each time: two of them never collide.
      expect(
        loadConfig({ ...upstreamEnv, ...productionReady, PORT: '0', METRICS_PORT: '0' }).production,
      ).toBe(true);
    });

    it.each([
      ['a redis:// URL', { REDIS_URL: 'redis://redis:6379' }, 'REDIS_URL', /rediss:\/\//],
      [
        'Sentinel without TLS',
        { REDIS_URL: '', REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'mymaster' },
        'REDIS_TLS',
        /REDIS_TLS=true/,
      ],
      [
        'Cluster without TLS',
        { REDIS_URL: '', REDIS_CLUSTER_NODES: 'n1:7000' },
        'REDIS_TLS',
        /REDIS_TLS=true/,
      ],
    ])('refuses Redis without TLS (%s) unless REDIS_ALLOW_PLAINTEXT=true', (_name, redis, variable, fix) => {
      const env = { ...upstreamEnv, ...productionReady, ...redis };
      const [problem, ...others] = problemsOf(env);
      expect(others).toEqual([]);
      expect(problem).toMatchObject({ variable });
      expect(problem?.message).toMatch(fix);
      expect(problem?.message).toMatch(/REDIS_ALLOW_PLAINTEXT=true/);
      expect(loadConfig({ ...env, REDIS_ALLOW_PLAINTEXT: 'true' }).redis.allowPlaintext).toBe(true);
      expect(loadConfig({ ...env, REDIS_TLS: 'true' }).production).toBe(true);
    });

    it('never names a secret value in a refusal', () => {
      const redisPassword = 'redis-pa55word-in-url';
      let message = '';
      try {
        loadConfig({ ...upstreamEnv, ...productionReady, REDIS_URL: `redis://:${redisPassword}@redis:6379` });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toContain('REDIS_URL');
      expect(message).not.toContain(redisPassword);
      expect(message).not.toContain(upstreamEnv.UPSTREAM_PASSWORD);
      expect(message).not.toContain(KEY);
    });
  });

  describe('UPSTREAM_CA_FILE', () => {
    it('reads the PEM certificates once and refuses an unreadable or non-PEM file', () => {
      const dir = tempDir('cfg-ca-');
      const pem = rootCertificates[0] as string;
      expect(() => new X509Certificate(pem)).not.toThrow();
      writeFileSync(join(dir, 'ca.pem'), `${pem}\n${pem}\n`);
      writeFileSync(join(dir, 'junk.pem'), 'not a certificate');
      const config = loadConfig({ ...testEnv, UPSTREAM_CA_FILE: join(dir, 'ca.pem') });
      expect(config.upstream.extraCa).toEqual([pem.trim(), pem.trim()]);
      expect(problemsOf({ ...testEnv, UPSTREAM_CA_FILE: join(dir, 'missing.pem') })).toEqual([
        expect.objectContaining({
          variable: 'UPSTREAM_CA_FILE',
          message: expect.stringMatching(/cannot be read/),
        }),
      ]);
      expect(problemsOf({ ...testEnv, UPSTREAM_CA_FILE: join(dir, 'junk.pem') })).toEqual([
        expect.objectContaining({
          variable: 'UPSTREAM_CA_FILE',
          message: expect.stringMatching(/no valid PEM/),
        }),
      ]);
    });
  });

  it('the login back-off runs from 20 s to 15 min by default; a maximum below the minimum is refused', () => {
    const config = loadConfig({ ...testEnv, UPSTREAM_BASE_URL: 'https://api.example.com' });
    expect(config.tokens.loginMinIntervalMs).toBe(20_000);
    expect(config.tokens.loginMaxIntervalMs).toBe(900_000);
    expect(
      problemsOf({
        ...testEnv,
        TOKEN_LOGIN_MIN_INTERVAL_MS: '60000',
        TOKEN_LOGIN_MAX_INTERVAL_MS: '30000',
      }),
    ).toEqual([expect.objectContaining({ variable: 'TOKEN_LOGIN_MAX_INTERVAL_MS' })]);
    expect(problemsOf({ TOKEN_LOGIN_MAX_INTERVAL_MS: '15min' })).toEqual([
      expect.objectContaining({ variable: 'TOKEN_LOGIN_MAX_INTERVAL_MS' }),
    ]);
  });

  it('reads secrets from *_FILE variables', () => {
    const dir = tempDir('cfg-');
    writeFileSync(join(dir, 'user'), 'file-user\n');
    writeFileSync(join(dir, 'pass'), 'file-pass\n');
    writeFileSync(join(dir, 'key'), `${KEY}\n`);
    const config = loadConfig({
      NODE_ENV: 'test',
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

  it('asks the Sentinels with REDIS_SENTINEL_PASSWORD, else REDIS_PASSWORD; refuses it without Sentinels', () => {
    const sentinels = {
      REDIS_SENTINELS: 'a:26379',
      REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_PASSWORD: 'master-pw',
    };
    expect(loadConfig(sentinels).redis).toMatchObject({
      password: 'master-pw',
      sentinelPassword: 'master-pw',
    });
    expect(loadConfig({ ...sentinels, REDIS_SENTINEL_PASSWORD: 'sentinel-pw' }).redis).toMatchObject({
      password: 'master-pw',
      sentinelPassword: 'sentinel-pw',
    });
    const problems = problemsOf({ REDIS_URL: 'redis://x:6379', REDIS_SENTINEL_PASSWORD: 'sentinel-pw' });
    expect(problems).toEqual([expect.objectContaining({ variable: 'REDIS_SENTINEL_PASSWORD' })]);
    expect(JSON.stringify(problems)).not.toContain('sentinel-pw');
  });

  it('refuses TRUST_PROXY=true but takes hop counts and CIDRs', () => {
    expect(problemsOf({ TRUST_PROXY: 'true' })).toEqual([
      expect.objectContaining({ variable: 'TRUST_PROXY' }),
    ]);
    // Every address is `true` spelled as a CIDR: any caller could forge X-Forwarded-For.
    // A zero prefix written with padding zeros is the same: Express (proxy-addr) would throw at start on it.
    for (const everyone of ['0.0.0.0/0', '10.0.0.0/8, ::/0', '0.0.0.0/00', '::/000'])
      expect(problemsOf({ TRUST_PROXY: everyone })).toEqual([
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

  it('refuses in production a TRUST_PROXY that trusts public address space however it is spelled, with the fix', () => {
    const hostile = [
      '0.0.0.0/1,128.0.0.0/1',
      '::/1,8000::/1',
      '::/1', // IPv4 callers are matched through ::ffff:a.b.c.d, so this trusts all of IPv4 too
      '::ffff:0:0/96',
      '8000::/1',
      '2000::/3',
      '1.0.0.0/8,2.0.0.0/8',
      '0.0.0.0/2,64.0.0.0/2,128.0.0.0/2,192.0.0.0/2',
      '10.0.0.0/8,0.0.0.0/1,128.0.0.0/1',
      '4',
      '100',
      // The well-known NAT64 prefix: an IPv6-only gateway behind a translator sees every IPv4 caller there.
      '64:ff9b::/96',
      '64:ff9b::/97,64:ff9b::8000:0/97',
    ];
    for (const trustProxy of hostile)
      expect([
        trustProxy,
        problemsOf({ ...upstreamEnv, ...productionReady, TRUST_PROXY: trustProxy }),
      ]).toEqual([
        trustProxy,
        [
          {
            variable: 'TRUST_PROXY',
            message: expect.stringMatching(
              /is refused in production: it trusts .*Instead, name only the proxies in front: their exact addresses .*hop count/,
            ),
          },
        ],
      ]);
    // Outside production the same settings start (a test bench may fake any address).
    expect(loadConfig({ TRUST_PROXY: '0.0.0.0/1,128.0.0.0/1' }).server.trustProxy).toHaveLength(2);
  });

  it('never suggests a whole private block in the production refusal (issue 42)', () => {
    const [problem] = problemsOf({
      ...upstreamEnv,
      ...productionReady,
      TRUST_PROXY: '0.0.0.0/1,128.0.0.0/1',
    });
    expect(problem?.message).not.toMatch(/uniquelocal|10\.0\.0\.0\/8|private CIDRs/);
  });

  it('refuses in production trust in the tunnels that carry any IPv4 caller: Teredo and 6to4 (issue 38)', () => {
    for (const tunnel of ['2001::/32', '2001:0:cb00:7100::/64', '2002::/16', '2002:200::/23'])
      expect([tunnel, problemsOf({ ...upstreamEnv, ...productionReady, TRUST_PROXY: tunnel })]).toEqual([
        tunnel,
        [
          {
            variable: 'TRUST_PROXY',
            message: expect.stringMatching(/is refused in production: it trusts .*public IPv4 addresses/),
          },
        ],
      ]);
    // One 6to4 site of a private proxy, or one Teredo client address, carries one IPv4 address.
    expect(
      loadConfig({ ...upstreamEnv, ...productionReady, TRUST_PROXY: '2002:a00:1::/48' }).server.trustProxy,
    ).toEqual(['2002:a00:1::/48']);
  });

  it('reads OIDC_ACCESS_TOKEN_TYPES as media types (at+jwt by default), lower case without application/', () => {
    const oidc = { OIDC_ISSUER: 'https://sso.example.com', OIDC_AUDIENCE: 'payments-bff' };
    expect(loadConfig(oidc).callers.oidc?.accessTokenTypes).toEqual(['at+jwt']);
    expect(
      loadConfig({ ...oidc, OIDC_ACCESS_TOKEN_TYPES: 'application/AT+JWT, JWT' }).callers.oidc
        ?.accessTokenTypes,
    ).toEqual(['at+jwt', 'jwt']);
    for (const bad of [',', 'at jwt', 'a/b/c'])
      expect(problemsOf({ ...oidc, OIDC_ACCESS_TOKEN_TYPES: bad }).map((p) => p.variable)).toEqual([
        'OIDC_ACCESS_TOKEN_TYPES',
      ]);
  });

  describe('INBOUND_ALLOW_CIDRS inside the TRUST_PROXY ranges (issue 42)', () => {
    const overlapping: Array<[string, string]> = [
      ['10.0.0.0/8', '10.1.0.0/16'],
      ['uniquelocal', '192.168.7.0/24'],
      ['loopback', '127.0.0.2'],
      ['10.1.2.3', '10.1.0.0/16'],
      ['::ffff:10.0.0.0/104', '10.1.0.0/16'],
      ['10.0.0.0/8', '::ffff:10.1.0.0/112'],
      ['fd00::/8', 'fd00:1::/32'],
    ];
    it.each(overlapping)(
      'TRUST_PROXY=%s with INBOUND_ALLOW_CIDRS=%s is refused in every mode',
      (trust, allowed) => {
        for (const env of [{}, testEnv, { ...upstreamEnv, ...productionReady }])
          expect(
            problemsOf({ ...env, TRUST_PROXY: trust, INBOUND_ALLOW_CIDRS: `203.0.113.0/24,${allowed}` }),
          ).toEqual([
            {
              variable: 'INBOUND_ALLOW_CIDRS',
              message: expect.stringMatching(
                new RegExp(
                  `^${allowed.replace(/[.]/g, '\\.')} overlaps the TRUST_PROXY ranges: .*the proxies' exact addresses`,
                ),
              ),
            },
          ]);
      },
    );

    it('takes callers outside the proxies, and any list behind a hop count', () => {
      for (const [trust, allowed] of [
        ['10.0.4.7,10.0.4.8', '10.1.0.0/16'],
        ['loopback', '10.1.0.0/16'],
        ['1', '10.1.0.0/16'],
        ['10.0.0.0/16', '10.1.0.0/16,2001:db8::/32'],
      ])
        expect(
          loadConfig({ TRUST_PROXY: trust, INBOUND_ALLOW_CIDRS: allowed }).server.inboundAllowCidrs,
        ).toEqual(allowed.split(','));
    });
  });

  it('takes in production the proxies an operator really has: private ranges, presets, a CDN, up to 3 hops', () => {
    const real = [
      '1',
      '3',
      'loopback, linklocal, uniquelocal',
      '10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7',
      '::ffff:10.0.0.0/104',
      '203.0.113.7',
      '64:ff9b::a00:0/104', // a private proxy (10.0.0.0/8) reached through the NAT64 translator
      '64:ff9b::cb00:7107',
      // Cloudflare's published edge ranges
      '173.245.48.0/20,103.21.244.0/22,103.22.200.0/22,103.31.4.0/22,141.101.64.0/18,108.162.192.0/18,190.93.240.0/20,188.114.96.0/20,197.234.240.0/22,198.41.128.0/17,162.158.0.0/15,104.16.0.0/13,104.24.0.0/14,172.64.0.0/13,131.0.72.0/22',
      '2400:cb00::/32,2606:4700::/32,2803:f800::/32,2405:b500::/32,2405:8100::/32,2a06:98c0::/29,2c0f:f248::/32',
    ];
    for (const trustProxy of real)
      expect(
        loadConfig({ ...upstreamEnv, ...productionReady, TRUST_PROXY: trustProxy }).server.trustProxy,
      ).toBeTruthy();
  });

  it('refuses, naming TRUST_PROXY, the IPv6 spellings Express cannot read (it would throw at start)', () => {
    for (const spelling of ['64:ff9b::10.0.0.0/104', '::1.2.3.4', '10.0.0.0/8, 1::192.0.2.1'])
      for (const env of [{}, { ...upstreamEnv, ...productionReady }])
        expect(problemsOf({ ...env, TRUST_PROXY: spelling })).toEqual([
          { variable: 'TRUST_PROXY', message: expect.stringContaining('hex groups') },
        ]);
    expect(loadConfig({ TRUST_PROXY: '::ffff:10.0.0.0/104' }).server.trustProxy).toEqual([
      '::ffff:10.0.0.0/104',
    ]);
  });

  it('reads hop counts in plain digits only', () => {
    for (const spelling of ['02', '+2', '0x2', '2.0', '1e0'])
      expect(problemsOf({ TRUST_PROXY: spelling }).map((p) => p.variable)).toEqual(['TRUST_PROXY']);
  });

  describe('Redis client certificates', () => {
    let pki: TestPki;
    let files: Record<'ca' | 'cert' | 'key' | 'otherKey', string>;
    beforeAll(async () => {
      pki = await createTestPki();
      const dir = tempDir('bff-redis-tls-config-');
      files = {
        ca: pki.caFile,
        cert: join(dir, 'client.crt'),
        key: join(dir, 'client.key'),
        otherKey: join(dir, 'other.key'),
      };
      writeFileSync(files.cert, pki.client.cert);
      writeFileSync(files.key, pki.client.key);
      writeFileSync(files.otherKey, pki.untrustedClient.key);
    });
    const tlsRedis = { REDIS_URL: 'rediss://redis:6380' };

    it('reads the certificate, its key and the CA (on top of the default roots) for a TLS Redis', () => {
      const { tlsFiles } = loadConfig({
        ...tlsRedis,
        REDIS_TLS_CERT_FILE: files.cert,
        REDIS_TLS_KEY_FILE: files.key,
        REDIS_TLS_CA_FILE: files.ca,
      }).redis;
      expect(tlsFiles?.cert).toBe(pki.client.cert);
      expect(tlsFiles?.key).toBe(pki.client.key);
      expect(tlsFiles?.ca).toEqual([...rootCertificates, pki.caPem.trim()]);
    });

    it('refuses a certificate without its key, a key of another certificate, and either without TLS, never echoing the key', () => {
      expect(problemsOf({ ...tlsRedis, REDIS_TLS_CERT_FILE: files.cert })).toEqual([
        { variable: 'REDIS_TLS_KEY_FILE', message: 'REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE go together' },
      ]);
      const mismatched = problemsOf({
        ...tlsRedis,
        REDIS_TLS_CERT_FILE: files.cert,
        REDIS_TLS_KEY_FILE: files.otherKey,
      });
      expect(mismatched).toEqual([
        {
          variable: 'REDIS_TLS_KEY_FILE',
          message: 'is not the private key of the certificate in REDIS_TLS_CERT_FILE',
        },
      ]);
      const notAKey = problemsOf({
        ...tlsRedis,
        REDIS_TLS_CERT_FILE: files.cert,
        REDIS_TLS_KEY_FILE: files.cert,
      });
      expect(notAKey.map((p) => p.variable)).toEqual(['REDIS_TLS_KEY_FILE']);
      expect(
        problemsOf({
          REDIS_URL: 'redis://redis:6379',
          REDIS_TLS_CERT_FILE: files.cert,
          REDIS_TLS_KEY_FILE: files.key,
        }),
      ).toEqual([
        expect.objectContaining({
          variable: 'REDIS_TLS_CERT_FILE',
          message: expect.stringMatching(/REDIS_TLS=true/),
        }),
      ]);
      const everything = JSON.stringify([mismatched, notAKey]);
      for (const line of [...pki.client.key.split('\n'), ...pki.untrustedClient.key.split('\n')].filter(
        (l) => !l.startsWith('-----') && l !== '',
      ))
        expect(everything).not.toContain(line);
    });
  });

  it('takes SESSION_CLIENT_AUTH_METHOD as basic or post, unset by default (the provider chooses)', () => {
    const sessions = {
      SESSION_ISSUER: 'http://127.0.0.1:9/',
      SESSION_CLIENT_ID: 'web',
      SESSION_CLIENT_SECRET: 's',
      SESSION_PUBLIC_URL: 'http://127.0.0.1:8080',
    };
    expect(loadConfig({ ...testEnv, ...sessions }).sessions?.clientAuthMethod).toBeUndefined();
    expect(
      loadConfig({ ...testEnv, ...sessions, SESSION_CLIENT_AUTH_METHOD: 'client_secret_post' }).sessions
        ?.clientAuthMethod,
    ).toBe('client_secret_post');
    expect(problemsOf({ ...testEnv, ...sessions, SESSION_CLIENT_AUTH_METHOD: 'private_key_jwt' })).toEqual([
      expect.objectContaining({
        variable: 'SESSION_CLIENT_AUTH_METHOD',
        message: expect.stringMatching(/client_secret_basic or client_secret_post/),
      }),
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

  it.each([
    'Keep-Alive: timeout=5',
    'upgrade: h2c',
    'Expect: 100-continue',
    'TE: trailers',
    'Idempotency-Key: same-for-all',
  ])('refuses the static header "%s" at start (the upstream client or the gateway owns it)', (value) => {
    expect(problemsOf({ UPSTREAM_STATIC_HEADERS: value })).toEqual([
      expect.objectContaining({
        variable: 'UPSTREAM_STATIC_HEADERS',
        message: expect.stringContaining('the gateway owns that header'),
      }),
    ]);
  });

  it.each([
    ['a character beyond Latin-1', '{"x-note":"price in \u20ac"}'],
    ['a control character', '{"x-note":"a\\u0001b"}'],
    ['a DEL', '{"x-note":"a\\u007fb"}'],
  ])('refuses a static header value with %s at start (no HTTP client can send it)', (_name, value) => {
    expect(problemsOf({ UPSTREAM_STATIC_HEADERS: value })).toEqual([
      expect.objectContaining({
        variable: 'UPSTREAM_STATIC_HEADERS',
        message: expect.stringContaining('invalid value for x-note'),
      }),
    ]);
  });

  it('keeps a static header value of Latin-1 text with a tab', () => {
    expect(
      loadConfig({ UPSTREAM_STATIC_HEADERS: '{"x-note":"caf\u00e9\\tok"}' }).upstream.staticHeaders,
    ).toEqual({ 'x-note': 'caf\u00e9\tok' });
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

describe('server keep-alive', () => {
  test('by default outlasts the 60 s idle timeout of nginx and AWS ALB, so the balancer closes idle connections first', () => {
    expect(loadConfig({}).server.keepAliveTimeoutMs).toBeGreaterThan(60_000);
  });

  test('can be raised above a longer balancer idle timeout', () => {
    expect(loadConfig({ SERVER_KEEP_ALIVE_TIMEOUT_MS: '125000' }).server.keepAliveTimeoutMs).toBe(125_000);
  });
});

describe('listen backlog', () => {
  test('defaults to 4096, room for a burst of new connections beyond Node’s 511', () => {
    expect(loadConfig({}).server.listenBacklog).toBe(4096);
    expect(loadConfig({ SERVER_LISTEN_BACKLOG: '16384' }).server.listenBacklog).toBe(16_384);
  });

  test.each(['0', '-1', '65536', '1.5', 'many'])(
    'SERVER_LISTEN_BACKLOG=%s is refused, naming it',
    (value) => {
      expect(() => loadConfig({ SERVER_LISTEN_BACKLOG: value })).toThrow(/SERVER_LISTEN_BACKLOG/);
    },
  );
});

describe('accept sockets', () => {
  test('defaults to 16 listening sockets; 1 to 64 may be set', () => {
    expect(loadConfig({}).server.acceptSockets).toBe(16);
    expect(loadConfig({ SERVER_ACCEPT_SOCKETS: '1' }).server.acceptSockets).toBe(1);
    expect(loadConfig({ SERVER_ACCEPT_SOCKETS: '64' }).server.acceptSockets).toBe(64);
  });

  test.each(['0', '65', '-3', '2.5', 'all'])('SERVER_ACCEPT_SOCKETS=%s is refused, naming it', (value) => {
    expect(() => loadConfig({ SERVER_ACCEPT_SOCKETS: value })).toThrow(/SERVER_ACCEPT_SOCKETS/);
  });
});

describe('usage and quota settings', () => {
  test('USAGE_REDIS_*: a store of its own in the three forms of REDIS_*, with its password and TLS settings', () => {
    expect(loadConfig({ REDIS_URL: 'redis://tokens:6379' }).usage.redis).toBeUndefined();
    const url = loadConfig({
      REDIS_URL: 'redis://tokens:6379',
      REDIS_PASSWORD: 'pw',
      USAGE_REDIS_URL: 'rediss://ledger:6380/1',
    });
    expect(url.usage.redis).toMatchObject({
      topology: { kind: 'standalone', url: 'rediss://ledger:6380/1' },
      password: 'pw',
      keyPrefix: 'bff:',
    });
    expect(url.redis.topology).toEqual({ kind: 'standalone', url: 'redis://tokens:6379' });
    expect(
      loadConfig({ USAGE_REDIS_SENTINELS: 'a:26379', USAGE_REDIS_SENTINEL_NAME: 'ledger' }).usage.redis
        ?.topology,
    ).toEqual({ kind: 'sentinel', name: 'ledger', sentinels: [{ host: 'a', port: 26379 }] });
    expect(loadConfig({ USAGE_REDIS_CLUSTER_NODES: 'n1:7000' }).usage.redis?.topology).toEqual({
      kind: 'cluster',
      nodes: [{ host: 'n1', port: 7000 }],
    });
    expect(problemsOf({ USAGE_REDIS_SENTINELS: 'a:26379' }).map((p) => p.variable)).toEqual([
      'USAGE_REDIS_SENTINEL_NAME',
    ]);
    expect(
      problemsOf({ USAGE_REDIS_URL: 'redis://x:6379', USAGE_REDIS_CLUSTER_NODES: 'n1:7000' }).map(
        (p) => p.variable,
      ),
    ).toEqual(['USAGE_REDIS_CLUSTER_NODES']);
    expect(problemsOf({ USAGE_REDIS_URL: 'http://x' }).map((p) => p.variable)).toEqual(['USAGE_REDIS_URL']);
  });

  test('USAGE_REDIS_* typos are refused, never a silent fall-back of the ledger to the token store', () => {
    // A sentinel name alone (its Sentinels forgotten or misspelled) would leave the ledger in the token store.
    expect(problemsOf({ REDIS_URL: 'redis://tokens:6379', USAGE_REDIS_SENTINEL_NAME: 'ledger' })).toEqual([
      { variable: 'USAGE_REDIS_SENTINEL_NAME', message: expect.stringContaining('USAGE_REDIS_SENTINELS') },
    ]);
    for (const [typo, meant] of [
      ['USAGE_REDIS_URI', 'USAGE_REDIS_URL'],
      ['USAGE_REDIS_CLUSTER_NODE', 'USAGE_REDIS_CLUSTER_NODES'],
      ['USAGE_REDIS_SENTINEL', 'USAGE_REDIS_SENTINELS'],
    ])
      expect(
        problemsOf({ REDIS_URL: 'redis://tokens:6379', [typo as string]: 'redis://ledger:6379' }),
      ).toEqual([{ variable: typo, message: expect.stringContaining(`did you mean ${meant}?`) }]);
  });

  test('REDIS_SENTINEL_PASSWORD serves USAGE_REDIS_SENTINELS too (tokens in a plain Redis, the ledger behind Sentinels)', () => {
    const env = {
      REDIS_URL: 'redis://tokens:6379',
      USAGE_REDIS_SENTINELS: 'a:26379',
      USAGE_REDIS_SENTINEL_NAME: 'ledger',
      REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
    };
    expect(loadConfig(env).usage.redis?.sentinelPassword).toBe('sentinel-secret');
    // Without any Sentinels it is still a mistake, named.
    expect(
      problemsOf({ REDIS_URL: 'redis://tokens:6379', REDIS_SENTINEL_PASSWORD: 'x' }).map((p) => p.variable),
    ).toEqual(['REDIS_SENTINEL_PASSWORD']);
  });

  test('production refuses a plaintext USAGE_REDIS_URL unless REDIS_ALLOW_PLAINTEXT', () => {
    const env = { ...upstreamEnv, ...productionReady, USAGE_REDIS_URL: 'redis://ledger:6379' };
    expect(problemsOf(env).map((p) => p.variable)).toEqual(['USAGE_REDIS_URL']);
    expect(() => loadConfig({ ...env, USAGE_REDIS_URL: 'rediss://ledger:6380' })).not.toThrow();
    expect(() => loadConfig({ ...env, REDIS_ALLOW_PLAINTEXT: 'true' })).not.toThrow();
  });

  test('USAGE_RETENTION_DAYS: 400 by default, decimal digits only', () => {
    expect(loadConfig({}).usage.retentionDays).toBe(400);
    expect(loadConfig({ USAGE_RETENTION_DAYS: '30' }).usage.retentionDays).toBe(30);
    for (const value of ['0', '-5', '1e3', '0x10', '7.5', 'forever', '3651'])
      expect(problemsOf({ USAGE_RETENTION_DAYS: value }).map((p) => p.variable)).toEqual([
        'USAGE_RETENTION_DAYS',
      ]);
  });

  test('QUOTA_WEBHOOK_URL needs its signing key (from the variable or a file) and is never echoed', () => {
    expect(problemsOf({ QUOTA_WEBHOOK_URL: 'https://hooks.example.com/q' })).toEqual([
      expect.objectContaining({ variable: 'QUOTA_WEBHOOK_SECRET' }),
    ]);
    const dir = tempDir('cfg-webhook-');
    const secretFile = join(dir, 'webhook-secret');
    writeFileSync(secretFile, 'a-long-enough-webhook-key\n');
    const config = loadConfig({
      QUOTA_WEBHOOK_URL: 'https://hooks.example.com/q',
      QUOTA_WEBHOOK_SECRET_FILE: secretFile,
    });
    expect(config.usage.webhook).toEqual({
      url: 'https://hooks.example.com/q',
      secret: 'a-long-enough-webhook-key',
    });
    const short = problemsOf({
      QUOTA_WEBHOOK_URL: 'https://hooks.example.com/q',
      QUOTA_WEBHOOK_SECRET: 'short-key',
    });
    expect(JSON.stringify(short)).not.toContain('short-key');
  });

  test('production refuses a plain-http webhook', () => {
    const problems = problemsOf({
      ...upstreamEnv,
      ...productionReady,
      NODE_ENV: 'production',
      QUOTA_WEBHOOK_URL: 'http://hooks.example.com/q',
      QUOTA_WEBHOOK_SECRET: 'a-long-enough-webhook-key',
    });
    expect(problems).toEqual([
      expect.objectContaining({ variable: 'QUOTA_WEBHOOK_URL', message: expect.stringMatching(/https/) }),
    ]);
  });
});
