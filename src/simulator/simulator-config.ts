// SIMULATOR_* variables: one schema, the documented defaults, and errors that name variables, never values.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { z } from 'zod';
import { ConfigError } from '../config/config-error';
import { normaliseIp } from './ip-allow-list';
import type { SimulatorOptions } from './options';

/** The sandbox credentials the simulator accepts by default; local mode logs the gateway in with them. */
export const SIMULATOR_DEFAULT_USERNAME = 'sandbox-merchant';
export const SIMULATOR_DEFAULT_PASSWORD = 'sandbox-password';

export const SIMULATOR_DEFAULTS: SimulatorOptions = Object.freeze({
  host: '127.0.0.1',
  port: 4010,
  username: SIMULATOR_DEFAULT_USERNAME,
  password: SIMULATOR_DEFAULT_PASSWORD,
  accessTtlSeconds: 300,
  refreshTtlSeconds: 86_400,
  allowedIps: Object.freeze([]) as readonly string[],
  rotateRefresh: false,
});

const int = (min: number, max: number, message: string) =>
  z
    .string()
    .regex(/^\d+$/, { error: message })
    .transform(Number)
    .pipe(z.number().min(min, { error: message }).max(max, { error: message }));

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const ipList = z.string().transform((raw, ctx) => {
  const ips = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(normaliseIp);
  if (ips.some((ip) => isIP(ip) === 0)) {
    ctx.addIssue({ code: 'custom', message: 'must be a comma-separated list of IP addresses' });
    return z.NEVER;
  }
  return ips;
});

/** Further merchant accounts as JSON `[{"username","password"}]`: a provider holds many (the bench's governed set-up). */
const EXTRA_ACCOUNTS_MESSAGE = 'must be a JSON array of {"username","password"} with distinct usernames';
const extraAccounts = z
  .string()
  .transform((raw, ctx) => {
    try {
      return JSON.parse(raw) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: EXTRA_ACCOUNTS_MESSAGE });
      return z.NEVER;
    }
  })
  .pipe(
    z
      .array(z.strictObject({ username: z.string().trim().min(1), password: z.string().trim().min(1) }), {
        error: EXTRA_ACCOUNTS_MESSAGE,
      })
      .refine((accounts) => new Set(accounts.map((a) => a.username)).size === accounts.length, {
        error: EXTRA_ACCOUNTS_MESSAGE,
      }),
  );

export const simulatorEnvSchema = z.object({
  SIMULATOR_HOST: z.string().min(1, { error: 'must not be empty' }).optional(),
  SIMULATOR_PORT: int(0, 65_535, 'must be an integer from 0 to 65535').optional(),
  SIMULATOR_USERNAME: z.string().min(1, { error: 'must not be empty' }).optional(),
  SIMULATOR_PASSWORD: z.string().min(1, { error: 'must not be empty' }).optional(),
  SIMULATOR_ACCESS_TTL_SECONDS: int(1, 31_536_000, 'must be a whole number of seconds from 1').optional(),
  SIMULATOR_REFRESH_TTL_SECONDS: int(1, 31_536_000, 'must be a whole number of seconds from 1').optional(),
  SIMULATOR_ALLOWED_IPS: ipList.optional(),
  SIMULATOR_ROTATE_REFRESH: bool.optional(),
  SIMULATOR_EXTRA_ACCOUNTS: extraAccounts.optional(),
  /** PEM certificate (chain) and key: the simulator serves HTTPS, like the provider. Both or neither. */
  SIMULATOR_TLS_CERT_FILE: z.string().min(1).optional(),
  SIMULATOR_TLS_KEY_FILE: z.string().min(1).optional(),
});

/** A bad value throws a {@link ConfigError} naming it, never echoing it: SIMULATOR_PASSWORD is a secret. */
export function loadSimulatorConfig(env: NodeJS.ProcessEnv): SimulatorOptions {
  const present: Record<string, string> = {};
  for (const key of Object.keys(simulatorEnvSchema.shape)) {
    const value = env[key];
    // An empty variable (common in compose files) means "use the default". Values are trimmed, as the
    // provider (a DRF CharField) trims the credentials it is sent.
    if (value !== undefined && value.trim() !== '') present[key] = value.trim();
  }
  const parsed = simulatorEnvSchema.safeParse(present);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => ({
      variable: String(issue.path[0] ?? 'SIMULATOR_*'),
      message: issue.message,
    }));
    throw new ConfigError(problems);
  }
  const v = parsed.data;
  const tls = readTls(v.SIMULATOR_TLS_CERT_FILE, v.SIMULATOR_TLS_KEY_FILE);
  const username = v.SIMULATOR_USERNAME ?? SIMULATOR_DEFAULTS.username;
  const extra = v.SIMULATOR_EXTRA_ACCOUNTS;
  if (extra?.some((account) => account.username === username))
    throw new ConfigError([
      { variable: 'SIMULATOR_EXTRA_ACCOUNTS', message: 'must not repeat the username of SIMULATOR_USERNAME' },
    ]);
  return Object.freeze({
    host: v.SIMULATOR_HOST ?? SIMULATOR_DEFAULTS.host,
    port: v.SIMULATOR_PORT ?? SIMULATOR_DEFAULTS.port,
    username,
    password: v.SIMULATOR_PASSWORD ?? SIMULATOR_DEFAULTS.password,
    accessTtlSeconds: v.SIMULATOR_ACCESS_TTL_SECONDS ?? SIMULATOR_DEFAULTS.accessTtlSeconds,
    refreshTtlSeconds: v.SIMULATOR_REFRESH_TTL_SECONDS ?? SIMULATOR_DEFAULTS.refreshTtlSeconds,
    allowedIps: Object.freeze(v.SIMULATOR_ALLOWED_IPS ?? [...SIMULATOR_DEFAULTS.allowedIps]),
    rotateRefresh: v.SIMULATOR_ROTATE_REFRESH ?? SIMULATOR_DEFAULTS.rotateRefresh,
    ...(tls ? { tls } : {}),
    ...(extra ? { extraAccounts: Object.freeze(extra.map((account) => Object.freeze(account))) } : {}),
  });
}

/** The certificate and key files, read once; one without the other, or an unreadable file, is refused. */
function readTls(certFile?: string, keyFile?: string): SimulatorOptions['tls'] {
  if (!certFile && !keyFile) return undefined;
  const problems: { variable: string; message: string }[] = [];
  const read = (variable: string, file: string | undefined): string => {
    if (!file) {
      problems.push({ variable, message: 'is required with the other SIMULATOR_TLS_* file' });
      return '';
    }
    try {
      return readFileSync(file, 'utf8');
    } catch {
      problems.push({ variable, message: 'names a file that cannot be read' });
      return '';
    }
  };
  const cert = read('SIMULATOR_TLS_CERT_FILE', certFile);
  const key = read('SIMULATOR_TLS_KEY_FILE', keyFile);
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({ cert, key });
}
