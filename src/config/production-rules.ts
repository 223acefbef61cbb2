// The production rules: when they apply, and what they refuse, each refusal naming the variable and the fix.
import type { RawEnv } from './env-schema';
import type { RedisTopology } from './gateway-config';
import { isHttpsUrl, type TrustProxySetting } from './parsers';
import { publicCoverage } from './trust-proxy-coverage';

type Fail = (variable: string, message: string) => void;

/** Refused logins retried faster than this could lock the merchant account. */
const PRODUCTION_MIN_LOGIN_INTERVAL_MS = 5_000;
/** The longest wait may not be shorter: a refused password then costs about 100 login attempts a day, not thousands. */
const PRODUCTION_MIN_LOGIN_MAX_INTERVAL_MS = 900_000;

/**
 * The longest proxy chain TRUST_PROXY may count. A real edge is at most a CDN, a cloud load balancer and an ingress
 * controller; every hop counted beyond the real chain is an X-Forwarded-For entry the caller wrote, so a generous
 * count is a forged address. Longer chains name their proxies by CIDR instead.
 */
export const MAX_TRUSTED_HOPS = 3;
/**
 * Public addresses a TRUST_PROXY list may trust: a CDN's published edge ranges (Cloudflare's are about 1.5 million
 * IPv4 addresses and fourteen IPv6 /32s) fit; anything more is trusting the Internet: `0.0.0.0/1,128.0.0.0/1`, `::/1`
 * and friends, whatever the spelling. One /8 of IPv4, one /24 of IPv6.
 */
const MAX_PUBLIC_IPV4_TRUSTED = 1n << 24n;
const MAX_PUBLIC_IPV6_TRUSTED = 1n << 104n;
/**
 * What to trust instead. Never a whole private block (10.0.0.0/8, `uniquelocal`): every workload of that network
 * would be a proxy that writes its own X-Forwarded-For (issue 42).
 */
const TRUST_PROXY_FIX =
  "name only the proxies in front: their exact addresses (e.g. 10.0.4.7,10.0.4.8) or the smallest CIDR that holds only them, loopback for a sidecar, a CDN's published ranges, or the hop count of the real chain (1 behind one load balancer)";

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
  const trustProxy = trustProxyProblem(env.TRUST_PROXY);
  if (trustProxy)
    fail('TRUST_PROXY', `is refused in production: it ${trustProxy}. Instead, ${TRUST_PROXY_FIX}${why}`);
  checkRedisTls(env, topology, fail, 'REDIS_');
}

/** Production speaks TLS to Redis (REDIS_* and, when set, USAGE_REDIS_*) unless REDIS_ALLOW_PLAINTEXT says so. */
export function checkRedisTls(env: RawEnv, topology: RedisTopology, fail: Fail, prefix: string): void {
  if (topology.kind === 'none' || redisUsesTls(topology, env.REDIS_TLS) || env.REDIS_ALLOW_PLAINTEXT) return;
  const fix =
    topology.kind === 'standalone'
      ? `use a rediss:// ${prefix}URL (or REDIS_TLS=true)`
      : 'set REDIS_TLS=true';
  fail(
    topology.kind === 'standalone' ? `${prefix}URL` : 'REDIS_TLS',
    `Redis without TLS is refused in production: ${fix}, or REDIS_ALLOW_PLAINTEXT=true for a private network${productionNote(env)}`,
  );
}

/** Why a TRUST_PROXY setting would let callers choose their own address, or undefined when it names real proxies. */
export function trustProxyProblem(setting: TrustProxySetting): string | undefined {
  if (setting === false) return undefined;
  if (typeof setting === 'number')
    return setting > MAX_TRUSTED_HOPS
      ? `trusts ${setting} hops, more than a real edge has (at most ${MAX_TRUSTED_HOPS}): callers would write the extra X-Forwarded-For entries themselves`
      : undefined;
  const { ipv4, ipv6 } = publicCoverage(setting);
  const excess = [
    ipv4 > MAX_PUBLIC_IPV4_TRUSTED && `${ipv4.toLocaleString('en-US')} public IPv4 addresses, more than a /8`,
    ipv6 > MAX_PUBLIC_IPV6_TRUSTED && 'more than a /24 of public IPv6',
  ].filter(Boolean);
  if (excess.length > 0)
    return `trusts public address space (${excess.join('; ')}): any caller there could forge X-Forwarded-For`;
  return undefined;
}
