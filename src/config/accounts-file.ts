// UPSTREAM_ACCOUNTS_FILE (SPEC §10): the provider accounts of the fleet, validated into AccountSpecs, watched and
// re-read on change and on SIGHUP. Paths to the secrets only, never the secrets: every message names the account and
// the field, never a value.
import { constants } from 'node:fs';
import { access, readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { ACCOUNT_ID_PATTERN, type AccountSpec, type AccountSpecSource } from './account-spec';
import { billableProblems } from './billable-statuses';
import { accountBudgetSchema } from './budget-schema';
import { ConfigError } from './config-error';
import type { GatewayConfig } from './gateway-config';
import { parseStaticHeaders } from './parsers';
import { readCaFile } from './tls-files';
import { watchFile } from './watch-file';

const VARIABLE = 'UPSTREAM_ACCOUNTS_FILE';

const absolutePath = (what: string) =>
  z
    .string()
    .min(1)
    .max(4096)
    .refine(isAbsolute, 'must be an absolute path (a relative one would depend on the working directory)')
    .meta({ description: `Absolute path of the file holding ${what}.` });

export const accountEntrySchema = z
  .strictObject({
    id: z
      .string()
      .regex(ACCOUNT_ID_PATTERN, 'must be 1-64 lower-case letters, digits and dashes (not at either end)')
      .meta({
        description: 'Account id: the X-Upstream-Account value, the metric label `account`, the log field.',
        examples: ['sandbox', 'production', 'merchant-br'],
      }),
    baseUrl: z
      .string()
      .min(1)
      .max(2048)
      .meta({
        description:
          "The provider's base URL for this account, as UPSTREAM_BASE_URL: https (http only with UPSTREAM_ALLOW_HTTP outside production), no user, password, query or fragment.",
        examples: ['https://sandbox.payments.example.com'],
      }),
    usernameFile: absolutePath("the account's username"),
    passwordFile: absolutePath("the account's password"),
    caFile: absolutePath('PEM certificates trusted for this provider on top of the default roots').optional(),
    staticHeaders: z.record(z.string(), z.string()).optional().meta({
      description: 'Headers sent on every upstream call of this account, e.g. {"x-version": "LPV3"}.',
    }),
    localAddress: z
      .string()
      .refine((value) => isIP(value) !== 0, 'must be an IPv4 or IPv6 address of this host')
      .optional()
      .meta({
        description:
          "Local address this account's upstream sockets (token calls and forwarded calls) bind to: the egress address the provider whitelisted.",
      }),
    maxSockets: z
      .int()
      .min(1)
      .max(10_000)
      .optional()
      .meta({ description: 'Upstream sockets of this account; UPSTREAM_MAX_SOCKETS when absent.' }),
    timeoutMs: z
      .int()
      .min(100)
      .max(120_000)
      .optional()
      .meta({ description: 'Upstream call timeout of this account; UPSTREAM_TIMEOUT_MS when absent.' }),
    // One schema for the budget, wherever it is read: src/config/budget-schema.ts (defaults filled in there).
    budget: accountBudgetSchema.optional(),
    billable: z
      .array(z.string().max(8))
      .min(1)
      .max(32)
      .superRefine((entries, ctx) => {
        for (const message of billableProblems(entries)) ctx.addIssue({ code: 'custom', message });
      })
      .optional()
      .meta({
        description:
          'Which final provider answers the provider bills (quotas and the usage ledger count them): status classes ("2xx") and codes ("404"), "!" excludes one. Default ["2xx", "4xx", "!401", "!403", "!429"].',
        examples: [
          ['2xx', '4xx', '!401', '!403', '!429'],
          ['2xx', '404'],
        ],
      }),
  })
  .meta({ description: 'One provider account: where the provider is and where its credentials are.' });

export const accountsFileSchema = z
  .strictObject({
    $schema: z.string().optional().meta({ description: 'Editor hint; ignored by the gateway.' }),
    accounts: z
      .array(accountEntrySchema)
      .min(1, 'must list at least one account')
      .meta({ description: 'Every provider account the gateway serves.' }),
  })
  .meta({
    title: 'Payments BFF gateway provider accounts',
    description:
      'UPSTREAM_ACCOUNTS_FILE: the provider accounts, each with the paths of its credentials (SPEC §10).',
  });

/** The JSON Schema (draft 2020-12) checked in as config/accounts.schema.json; a unit test keeps the two equal. */
export function accountsJsonSchema(): Record<string, unknown> {
  // The file as written (io: input): what a budget may leave out is optional there, filled in when read.
  return z.toJSONSchema(accountsFileSchema, { target: 'draft-2020-12', io: 'input' }) as Record<
    string,
    unknown
  >;
}

export interface AccountsFileOptions {
  /** Absolute path of the accounts file. */
  readonly file: string;
  readonly production: boolean;
  /** UPSTREAM_ALLOW_HTTP (never in production). */
  readonly allowHttp: boolean;
  /** UPSTREAM_MAX_SOCKETS and UPSTREAM_TIMEOUT_MS: an account's values when it sets none. */
  readonly defaults: { readonly maxSockets: number; readonly timeoutMs: number };
  /** Period of the stat fallback of the watch. Default 5000 ms. */
  readonly pollIntervalMs?: number;
}

/** The options the gateway's configuration gives the accounts file (its path must be set). */
export function accountsFileOptionsOf(config: GatewayConfig, file: string): AccountsFileOptions {
  return {
    file,
    production: config.production,
    allowHttp: config.upstream.allowHttp,
    defaults: { maxSockets: config.upstream.maxSockets, timeoutMs: config.upstream.timeoutMs },
  };
}

/** Field names that hold a secret itself: refused with the name of the field that takes its path instead. */
const INLINE_SECRET = /^(user(name)?|pass(word)?|secret|client_?secret|token|api_?key|credentials?)$/i;

type Problem = string;

/** The accounts file as an AccountSpecSource: `read` validates it whole (a ConfigError lists every problem). */
export function createAccountsFileSource(options: AccountsFileOptions): AccountSpecSource {
  return {
    read: () => readAccountsFile(options),
    watch: (onChange) => watchFile(options.file, options.pollIntervalMs ?? 5_000, onChange),
  };
}

/** Reads and validates the accounts file; throws a ConfigError naming the file, each account and field. */
export async function readAccountsFile(options: AccountsFileOptions): Promise<AccountSpec[]> {
  const fail = (problems: readonly Problem[]) =>
    new ConfigError(problems.map((message) => ({ variable: VARIABLE, message })));
  let text: string;
  try {
    text = await readFile(options.file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    throw fail([`names a file that cannot be read (${code}): ${options.file}`]);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw fail([`${options.file} is not valid JSON`]);
  }
  const secrets = inlineSecrets(raw);
  if (secrets.length > 0) throw fail(secrets);
  const parsed = accountsFileSchema.safeParse(raw);
  if (!parsed.success) throw fail(parsed.error.issues.map((issue) => describe(issue, raw)));
  const problems: Problem[] = [];
  const seen = new Set<string>();
  const specs: AccountSpec[] = [];
  for (const [index, entry] of parsed.data.accounts.entries()) {
    const where = `account "${entry.id}" (accounts[${index}])`;
    if (seen.has(entry.id)) {
      problems.push(`${where} id: appears more than once (each account has its own id)`);
      continue;
    }
    seen.add(entry.id);
    const spec = await specOf(entry, options, (field, message) =>
      problems.push(`${where} ${field}: ${message}`),
    );
    if (spec) specs.push(spec);
  }
  if (problems.length > 0) throw fail(problems);
  return specs;
}

type AccountEntry = z.infer<typeof accountEntrySchema>;

async function specOf(
  entry: AccountEntry,
  options: AccountsFileOptions,
  problem: (field: string, message: string) => void,
): Promise<AccountSpec | undefined> {
  const baseUrl = canonicalBaseUrl(entry.baseUrl, options, (message) => problem('baseUrl', message));
  for (const field of ['usernameFile', 'passwordFile'] as const) {
    try {
      await access(entry[field], constants.R_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'error';
      problem(field, `names a file that cannot be read (${code}): ${entry[field]}`);
    }
  }
  let extraCa: string[] | undefined;
  if (entry.caFile)
    extraCa = readCaFile('caFile', entry.caFile, (_variable, message) => problem('caFile', message));
  let staticHeaders: Record<string, string> = {};
  try {
    staticHeaders = parseStaticHeaders(JSON.stringify(entry.staticHeaders ?? {}));
  } catch (error) {
    problem('staticHeaders', (error as Error).message);
  }
  if (baseUrl === undefined) return undefined;
  return {
    id: entry.id,
    baseUrl,
    credentials: { usernameFile: entry.usernameFile, passwordFile: entry.passwordFile },
    ...(extraCa && { extraCa }),
    staticHeaders,
    ...(entry.localAddress && { localAddress: entry.localAddress }),
    maxSockets: entry.maxSockets ?? options.defaults.maxSockets,
    timeoutMs: entry.timeoutMs ?? options.defaults.timeoutMs,
    ...(entry.budget && { budget: entry.budget }),
    ...(entry.billable && { billable: entry.billable }),
  };
}

/** The rules of UPSTREAM_BASE_URL, per account; the value is never echoed (it may hold a user and password). */
function canonicalBaseUrl(
  raw: string,
  options: AccountsFileOptions,
  problem: (message: string) => void,
): string | undefined {
  if (!URL.canParse(raw)) {
    problem('must be an http(s) URL');
    return undefined;
  }
  const url = new URL(raw);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    problem('must be an http(s) URL');
    return undefined;
  }
  if (url.protocol === 'http:') {
    if (options.production) problem('must be https in production');
    else if (!options.allowHttp) problem('must be https (set UPSTREAM_ALLOW_HTTP=true for tests)');
  }
  if (url.username || url.password || raw.includes('?') || raw.includes('#')) {
    problem(
      "must be the provider's base URL only (scheme, host, port, path), without user, password, query or fragment: the credentials are usernameFile and passwordFile",
    );
    return undefined;
  }
  return url.href.replace(/\/+$/, '');
}

/** Fields that would hold a secret itself, found before the schema (whose message would only say "unrecognized"). */
function inlineSecrets(raw: unknown): Problem[] {
  const accounts = (raw as { accounts?: unknown })?.accounts;
  if (!Array.isArray(accounts)) return [];
  const problems: Problem[] = [];
  accounts.forEach((entry, index) => {
    if (typeof entry !== 'object' || entry === null) return;
    for (const field of Object.keys(entry))
      if (INLINE_SECRET.test(field))
        problems.push(
          `${nameOf(entry, index)} ${field}: a secret has no place in the accounts file; put it in a file of its own and give its absolute path as ${/^user/i.test(field) ? 'usernameFile' : 'passwordFile'}`,
        );
  });
  return problems;
}

function nameOf(entry: unknown, index: number): string {
  const id = (entry as { id?: unknown }).id;
  return typeof id === 'string' && ACCOUNT_ID_PATTERN.test(id)
    ? `account "${id}" (accounts[${index}])`
    : `accounts[${index}]`;
}

/** `account "br" (accounts[1]) usernameFile: must be ...`: zod messages never include the offending value. */
function describe(issue: z.core.$ZodIssue, raw: unknown): string {
  const [top, index, ...rest] = issue.path;
  if (top !== 'accounts' || typeof index !== 'number')
    return `${issue.path.length > 0 ? issue.path.join('.') : 'the file'}: ${issue.message}`;
  const entry = (raw as { accounts: unknown[] }).accounts[index];
  const field = rest.map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`)).join('');
  return `${nameOf(entry ?? {}, index)}${field ? ` ${field.replace(/^\./, '')}` : ''}: ${issue.message}`;
}
