// The production rules: when they apply, and what they refuse, each refusal naming the variable and the fix.
import type { RawEnv } from './env-schema';
import type { RedisTopology } from './gateway-config';
import { isHttpsUrl } from './parsers';

type Fail = (variable: string, message: string) => void;

/** Refused logins retried faster than this could lock the merchant account. */
const PRODUCTION_MIN_LOGIN_INTERVAL_MS = 5_000;
/** The longest wait may not be shorter: a refused password then costs about 100 login attempts a day, not thousands. */
const PRODUCTION_MIN_LOGIN_MAX_INTERVAL_MS = 900_000;

/**
 * Secure by default: production unless NODE_ENV says otherwise. An upstream with NODE_ENV unset is production;
 * only an explicit `development` or `test` opts out. Local mode (no upstream) stays a development mode.
 */
export function isProduction(
  env: Pick<RawEnv, 'NODE_ENV' | 'UPSTREAM_BASE_URL'> & Partial<Pick<RawEnv, 'UPSTREAM_ACCOUNTS_FILE'>>,
): boolean {
  if (env.NODE_ENV === 'production') return true;
  const upstream = env.UPSTREAM_BASE_URL !== undefined || env.UPSTREAM_ACCOUNTS_FILE !== undefined;
  return upstream && env.NODE_ENV === undefined;
}

/** Why production applies, appended to each refusal so an operator who never set NODE_ENV understands it. */
export function productionNote(env: Pick<RawEnv, 'NODE_ENV'>): string {
  return env.NODE_ENV === 'production'
    ? ''
    : ' (production rules apply with an upstream unless NODE_ENV=development or test)';
}

/** Whether Redis traffic is encrypted: a rediss:// URL, or REDIS_TLS for any topology. */
export function redisUsesTls(topology: RedisTopology, redisTls: boolean): boolean {
  if (redisTls) return true;
  return topology.kind === 'standalone' && topology.url.startsWith('rediss:');
}

/** The refusals that only production makes (the always-on rules stay in load-config). */
export function checkProductionRules(env: RawEnv, topology: RedisTopology, fail: Fail): void {
  const why = productionNote(env);
  for (const name of ['OIDC_ISSUER', 'OIDC_JWKS_URL'] as const) {
    const url = env[name];
    if (url !== undefined && !isHttpsUrl(url))
      fail(
        name,
        `must be an https URL in production: caller tokens are verified with keys fetched from it${why}`,
      );
  }
  if (env.METRICS_PORT === undefined && !env.METRICS_ON_MAIN_PORT)
    fail(
      'METRICS_PORT',
      `is required in production so /metrics is not on the callers' port: set METRICS_PORT (e.g. 9464), or METRICS_ON_MAIN_PORT=true to serve it on PORT${why}`,
    );
  if (env.TOKEN_LOGIN_MIN_INTERVAL_MS < PRODUCTION_MIN_LOGIN_INTERVAL_MS)
    fail(
      'TOKEN_LOGIN_MIN_INTERVAL_MS',
      `must be at least ${PRODUCTION_MIN_LOGIN_INTERVAL_MS} in production (refused logins retried faster can lock the merchant account)${why}`,
    );
  if (env.TOKEN_LOGIN_MAX_INTERVAL_MS < PRODUCTION_MIN_LOGIN_MAX_INTERVAL_MS)
    fail(
      'TOKEN_LOGIN_MAX_INTERVAL_MS',
      `must be at least ${PRODUCTION_MIN_LOGIN_MAX_INTERVAL_MS} in production (a shorter longest wait lets a wrong password cost thousands of refused logins a day)${why}`,
    );
  if (topology.kind !== 'none' && !redisUsesTls(topology, env.REDIS_TLS) && !env.REDIS_ALLOW_PLAINTEXT) {
    const fix =
      topology.kind === 'standalone' ? 'use a rediss:// REDIS_URL (or REDIS_TLS=true)' : 'set REDIS_TLS=true';
    fail(
      topology.kind === 'standalone' ? 'REDIS_URL' : 'REDIS_TLS',
      `Redis without TLS is refused in production: ${fix}, or REDIS_ALLOW_PLAINTEXT=true for a private network${why}`,
    );
  }
}
