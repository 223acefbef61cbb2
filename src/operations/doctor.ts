// `npm run doctor`: configuration, store, and per provider account the fleet's login back-off and one real token
// request (only when the fleet would log in), each turned into a verdict with its fix.
import { isIP } from 'node:net';
import type { AccountSpec } from '../config/account-spec';
import { ConfigError } from '../config/config-error';
import type { GatewayConfig } from '../config/gateway-config';
import type { Durability } from '../store/redis-durability';
import { describeTlsCode } from '../tls/tls-failure';
import { type BackoffRecord, type RefusalReason, refusalOfStatus } from '../tokens';
import {
  type AccountLabel,
  type BackoffCheck,
  diagnoseBackoff,
  egressOf,
  FORCE_LOGIN_FLAG,
  formatDuration,
  mayLogIn,
} from './doctor-backoff';
import { type BudgetCheck, diagnoseBudget } from './doctor-budget';

/** One printed line: what was checked, how it went, and the one-line fix when it failed. */
export interface DoctorStep {
  readonly title: string;
  /** `warn`: the gateway runs, but not as the operator probably wants (the report still passes). */
  readonly state: 'pass' | 'warn' | 'fail' | 'skipped';
  readonly detail: string;
  readonly fix?: string;
}

export type StoreCheck =
  | { readonly kind: 'memory'; readonly reason: string }
  | { readonly kind: 'redis'; readonly where: string; readonly ok: true; readonly latencyMs: number }
  | { readonly kind: 'redis'; readonly where: string; readonly ok: false; readonly problem: string };

/** The Redis of the usage ledger and the quota counters, and whether it keeps them (or why it could not be read). */
export type LedgerStoreCheck =
  | { readonly kind: 'memory' }
  | {
      readonly kind: 'redis';
      readonly where: string;
      /** USAGE_REDIS_*: a Redis of its own, not the token store's. */
      readonly separate: boolean;
      readonly durability: Durability;
      /** It answered as a read-only replica: the ledger and the quota counters could not be written there. */
      readonly replica?: true;
    }
  | { readonly kind: 'redis'; readonly where: string; readonly separate: boolean; readonly problem: string };

/** What one `POST /api/token/` gave. Never holds a credential or a token. */
export type TokenAttempt =
  | {
      readonly kind: 'answer';
      /** Where the request went, without credentials: an origin or "the bundled simulator". */
      readonly target: string;
      readonly status: number;
      /** A 200 carried an access and a refresh token. */
      readonly tokenIssued: boolean;
      readonly accessLifetimeSeconds?: number;
      /** The local address of the socket that reached the upstream (the egress IP before any NAT). */
      readonly localAddress?: string;
    }
  | {
      readonly kind: 'error';
      readonly target: string;
      /** A Node/OpenSSL error code: ECONNREFUSED, ENOTFOUND, CERT_HAS_EXPIRED, ... */
      readonly code?: string;
      readonly timedOut: boolean;
      readonly timeoutMs: number;
    };

/** What loading CLIENTS_FILE with the gateway's own loader gave. Never holds a key hash. */
export type ClientsCheck =
  | { readonly kind: 'loaded'; readonly file: string; readonly clients: number }
  | { readonly kind: 'unreadable'; readonly file: string; readonly code: string }
  | { readonly kind: 'invalid'; readonly file: string; readonly problems: readonly string[] };

/** The doctor's probes of one account: the fleet's back-off for its credentials, a login, a refusal shared. */
export interface AccountProbe {
  readBackoff(): Promise<BackoffCheck>;
  requestToken(): Promise<TokenAttempt>;
  /** Shares a refusal the doctor's own login met, as a replica would; the record, or undefined when not shared. */
  shareRefusal(reason: RefusalReason): Promise<BackoffRecord | undefined>;
  /** The fleet's budget record of the account (informative); absent: no budget line. */
  readBudget?(): Promise<BudgetCheck>;
  close(): Promise<void>;
}

/** The accounts to check, and what to close after (local mode's simulator). */
export interface AccountList {
  readonly accounts: readonly AccountSpec[];
  close(): Promise<void>;
}

export interface DoctorDeps {
  /** Reads and validates the environment; throws a ConfigError naming each bad variable. */
  loadConfig(): GatewayConfig;
  checkClients(config: GatewayConfig): ClientsCheck;
  checkStore(config: GatewayConfig): Promise<StoreCheck>;
  /** The ledger's and quotas' Redis: persistence and eviction (absent: no step, as in tests of other steps). */
  checkLedgerStore?(config: GatewayConfig): Promise<LedgerStoreCheck>;
  /** The provider accounts to check; throws a ConfigError naming what is wrong (an invalid accounts file). */
  listAccounts(config: GatewayConfig): Promise<AccountList>;
  probeAccount(config: GatewayConfig, account: AccountSpec): Promise<AccountProbe>;
  /** Browser sessions' provider and web app, as a step (undefined when SESSION_ISSUER is not set: no step). */
  checkSessionProvider?(config: GatewayConfig): Promise<DoctorStep | undefined>;
  /** OPERATIONS_FILE as the gateway would load it (doctor-catalogue.ts); absent: no step. */
  checkCatalogue?(config: GatewayConfig): DoctorStep;
  /** --force-login: one login per account even while the fleet backs off (the operator's explicit choice). */
  readonly forceLogin?: boolean;
}

export interface DoctorReport {
  readonly ok: boolean;
  readonly steps: readonly DoctorStep[];
}

const TITLES = {
  config: 'configuration',
  clients: 'client registry',
  store: 'token store',
  ledgerStore: 'usage store',
  accounts: 'provider accounts',
  token: 'upstream token request',
} as const;

const tokenTitle = (account: AccountLabel) => `${TITLES.token} (account ${account.id})`;

/** Runs the checks in order; a bad configuration skips the others (they would only repeat it). */
export async function runDoctor(deps: DoctorDeps): Promise<DoctorReport> {
  const steps: DoctorStep[] = [];
  let config: GatewayConfig;
  try {
    config = deps.loadConfig();
  } catch (error) {
    steps.push(diagnoseConfigError(error));
    for (const title of [TITLES.clients, TITLES.store, TITLES.token])
      steps.push({ title, state: 'skipped', detail: 'needs a valid configuration' });
    return { ok: false, steps };
  }
  steps.push({ title: TITLES.config, state: 'pass', detail: describeConfig(config) });
  steps.push(diagnoseClients(deps.checkClients(config), config.callers.oidc !== undefined));
  if (deps.checkCatalogue) steps.push(deps.checkCatalogue(config));
  steps.push(diagnoseStore(await deps.checkStore(config).catch(unexpectedStoreFailure)));
  if (deps.checkLedgerStore)
    steps.push(
      diagnoseLedgerStore(
        await deps.checkLedgerStore(config).catch(
          (error: unknown): LedgerStoreCheck => ({
            kind: 'redis',
            where: 'Redis',
            separate: false,
            problem: (error as Error)?.name ?? 'error',
          }),
        ),
      ),
    );
  steps.push(...(await checkAccounts(deps, config)));
  const sessionProvider = await deps.checkSessionProvider?.(config);
  if (sessionProvider) steps.push(sessionProvider);
  return { ok: steps.every((step) => step.state === 'pass' || step.state === 'warn'), steps };
}

/** Every account in turn: its back-off first, then a login only when the fleet would (or when forced). */
async function checkAccounts(deps: DoctorDeps, config: GatewayConfig): Promise<DoctorStep[]> {
  let list: AccountList;
  try {
    list = await deps.listAccounts(config);
  } catch (error) {
    return [
      { ...diagnoseConfigError(error), title: TITLES.accounts },
      { title: TITLES.token, state: 'skipped', detail: 'needs a valid set of accounts' },
    ];
  }
  const steps: DoctorStep[] = [];
  try {
    for (const account of list.accounts) steps.push(...(await checkAccount(deps, config, account)));
  } finally {
    await list.close();
  }
  return steps;
}

async function checkAccount(
  deps: DoctorDeps,
  config: GatewayConfig,
  account: AccountSpec,
): Promise<DoctorStep[]> {
  const probe = await deps.probeAccount(config, account);
  try {
    const steps = await checkLogin(deps, account, probe);
    const budget = await probe.readBudget?.();
    return budget ? [...steps, diagnoseBudget(budget, account)] : steps;
  } finally {
    await probe.close();
  }
}

/** The fleet's back-off, then one login when the fleet would (or when forced). */
async function checkLogin(
  deps: DoctorDeps,
  account: AccountSpec,
  probe: AccountProbe,
): Promise<DoctorStep[]> {
  const forceLogin = deps.forceLogin === true;
  const backoff = await probe.readBackoff();
  const backoffStep = diagnoseBackoff(backoff, account, forceLogin);
  if (!mayLogIn(backoff, forceLogin))
    return [
      backoffStep,
      {
        title: tokenTitle(account),
        state: 'skipped',
        detail: `not attempted while the fleet backs off (${FORCE_LOGIN_FLAG} tries once anyway)`,
      },
    ];
  const attempt = await probe.requestToken();
  const tokenStep = diagnoseToken(attempt, account);
  const refusal = refusalOf(attempt);
  const shared = refusal && (await probe.shareRefusal(refusal));
  const sharedNote = shared
    ? `; shared with the fleet: no replica (nor the next doctor run) logs in for ${formatDuration(shared.waitMs)}`
    : '';
  return [backoffStep, { ...tokenStep, detail: `${tokenStep.detail}${sharedNote}` }];
}

/** The refusal a login answer is, as the token client names it (401/400 credentials, 403 IP). */
function refusalOf(attempt: TokenAttempt): RefusalReason | undefined {
  return attempt.kind === 'answer' ? refusalOfStatus(attempt.status) : undefined;
}

/** The printed report: `✓`/`!`/`✗`/`-` a line, the fix indented under it, and the verdict last. */
export function formatReport(report: DoctorReport): string {
  const mark = { pass: '✓', warn: '!', fail: '✗', skipped: '-' } as const;
  const lines = ['payments-bff doctor', ''];
  for (const step of report.steps) {
    lines.push(`${mark[step.state]} ${step.title}: ${step.detail}`);
    if (step.fix) lines.push(`    fix: ${step.fix}`);
  }
  const failed = report.steps.filter((step) => step.state === 'fail' || step.state === 'skipped').length;
  const warned = report.steps.filter((step) => step.state === 'warn').length;
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  lines.push(
    '',
    !report.ok
      ? `${plural(failed, 'check')} did not pass.`
      : warned > 0
        ? `No check failed; ${plural(warned, 'warning')} above.`
        : 'All checks passed.',
  );
  return `${lines.join('\n')}\n`;
}

function describeConfig(config: GatewayConfig): string {
  const topology = config.redis.topology.kind === 'none' ? 'no Redis' : `Redis ${config.redis.topology.kind}`;
  const mode = config.mode === 'local' ? 'local mode (bundled simulator)' : 'upstream mode';
  return `valid (${mode}, ${config.production ? 'production' : 'non-production'}, ${topology})`;
}

/** The registry as the gateway would load it: missing or invalid stops the gateway; empty lets nobody in. */
export function diagnoseClients(check: ClientsCheck, oidcConfigured: boolean): DoctorStep {
  const title = TITLES.clients;
  if (check.kind === 'unreadable')
    return {
      title,
      state: 'fail',
      detail: `${check.file} cannot be read (${check.code}): the gateway refuses to start without it`,
      fix:
        check.code === 'ENOENT'
          ? 'create the file (`npm run client-key -- <clientId> [scopes…]` prints an entry) or point CLIENTS_FILE at it'
          : 'make CLIENTS_FILE a file the gateway user can read',
    };
  if (check.kind === 'invalid')
    return {
      title,
      state: 'fail',
      detail: `${check.file} is invalid, the gateway refuses to start with it: ${check.problems.join('; ')}`,
      fix: 'correct the entries named above (format: config/clients.schema.json); `npm run client-key` prints valid entries',
    };
  if (check.clients === 0)
    return {
      title,
      state: 'warn',
      detail: `${check.file} lists no client: nobody is let in with an API key${
        oidcConfigured ? ' (SSO bearer tokens still are)' : ', and without OIDC nobody is let in at all'
      }`,
      fix: 'add clients: `npm run client-key -- <clientId> [scopes…]` prints a key and the entry to paste',
    };
  return {
    title,
    state: 'pass',
    detail: `${check.file}: ${check.clients} client${check.clients === 1 ? '' : 's'}`,
  };
}

export function diagnoseConfigError(error: unknown): DoctorStep {
  if (error instanceof ConfigError) {
    const names = [...new Set(error.problems.map((p) => p.variable))];
    return {
      title: TITLES.config,
      state: 'fail',
      detail: `invalid: ${error.problems.map((p) => `${p.variable} ${p.message}`).join('; ')}`,
      fix: `set ${names.join(', ')} as .env.example describes (secrets may come from <NAME>_FILE)`,
    };
  }
  return {
    title: TITLES.config,
    state: 'fail',
    detail: `could not be read (${(error as Error)?.name ?? 'error'})`,
    fix: 'check the environment against .env.example',
  };
}

function unexpectedStoreFailure(error: unknown): StoreCheck {
  return { kind: 'redis', where: 'Redis', ok: false, problem: (error as Error)?.name ?? 'error' };
}

export function diagnoseStore(check: StoreCheck): DoctorStep {
  if (check.kind === 'memory')
    return { title: TITLES.store, state: 'pass', detail: `memory store (${check.reason})` };
  if (check.ok)
    return {
      title: TITLES.store,
      state: 'pass',
      detail: `${check.where} answered PING in ${check.latencyMs} ms`,
    };
  return {
    title: TITLES.store,
    state: 'fail',
    detail: `${check.where} is unreachable (${check.problem})`,
    fix: /NOAUTH|WRONGPASS|AUTH/i.test(check.problem)
      ? 'Redis refused the password: check REDIS_PASSWORD / REDIS_PASSWORD_FILE (and REDIS_SENTINEL_PASSWORD if the Sentinels have one of their own)'
      : /certificate|alert|ECONNRESET/i.test(check.problem)
        ? 'Redis may require a client certificate (tls-auth-clients): set REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE, and REDIS_TLS_CA_FILE for a private CA'
        : 'check REDIS_URL (or REDIS_SENTINELS / REDIS_CLUSTER_NODES), REDIS_TLS and that this host may reach Redis',
  };
}

/**
 * The usage ledger (400 days) and the month quotas must survive a Redis restart: persistence off or an evicting policy
 * fails; a Redis that refuses CONFIG GET (managed services) is unknown, a warning, never a failure.
 */
export function diagnoseLedgerStore(check: LedgerStoreCheck): DoctorStep {
  const title = TITLES.ledgerStore;
  if (check.kind === 'memory')
    return {
      title,
      state: 'pass',
      detail: 'memory: each process keeps its own ledger and quota counters (no Redis configured)',
    };
  const whose = check.separate ? ' (USAGE_REDIS_*)' : ' (the token store, holding the ledger and quotas too)';
  if ('problem' in check)
    return check.separate
      ? {
          title,
          state: 'fail',
          detail: `${check.where}${whose} is unreachable (${check.problem})`,
          fix: 'check USAGE_REDIS_URL (or USAGE_REDIS_SENTINELS / USAGE_REDIS_CLUSTER_NODES) and that this host may reach it',
        }
      : { title, state: 'skipped', detail: 'needs the token store, which did not answer' };
  const { durability } = check;
  if (check.replica)
    return {
      title,
      state: 'fail',
      detail: `${check.where}${whose} is a read-only replica: the ledger and the quota counters cannot be written there`,
      fix: check.separate
        ? 'point USAGE_REDIS_URL at the master (or use USAGE_REDIS_SENTINELS, which find it)'
        : 'point REDIS_URL at the master (or use REDIS_SENTINELS, which find it)',
    };
  switch (durability.state) {
    case 'durable':
      return {
        title,
        state: 'pass',
        detail: `${check.where}${whose} keeps the ledger: ${durability.detail}`,
      };
    case 'weak':
      return {
        title,
        state: 'warn',
        detail: `${check.where}${whose}: ${durability.detail}`,
        fix: durability.fix,
      };
    case 'unknown':
      return {
        title,
        state: 'warn',
        detail: `unknown: ${check.where}${whose}: ${durability.detail}`,
        fix: durability.fix,
      };
    case 'not-durable':
      return {
        title,
        state: 'fail',
        detail: `${check.where}${whose} would lose the usage ledger and the quota counters: ${durability.detail}`,
        fix: durability.fix,
      };
  }
}

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);
const TIMEOUT_CODES = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']);

/** Tells the failure modes apart: credentials (401), IP whitelisting (403), TLS, DNS, refused, timeout. */
export function diagnoseToken(
  attempt: TokenAttempt,
  account: AccountLabel = { id: DEFAULT_ACCOUNT },
): DoctorStep {
  return attempt.kind === 'error' ? diagnoseUnreachable(attempt, account) : diagnoseAnswer(attempt, account);
}

const DEFAULT_ACCOUNT = 'default';

/**
 * Where an account's credentials come from, in the words of its configuration: `names` for the refusal, `files` for
 * its fix.
 */
function credentialSettings(account: AccountLabel): { names: string; files: string } {
  return account.id === DEFAULT_ACCOUNT
    ? {
        names: 'UPSTREAM_USERNAME/UPSTREAM_PASSWORD',
        files: 'the configured username and password (UPSTREAM_USERNAME[_FILE], UPSTREAM_PASSWORD[_FILE])',
      }
    : {
        names: `the usernameFile/passwordFile of account ${account.id}`,
        files: `the files named by the usernameFile and passwordFile of account ${account.id} in UPSTREAM_ACCOUNTS_FILE`,
      };
}

function diagnoseUnreachable(
  attempt: Extract<TokenAttempt, { kind: 'error' }>,
  account: AccountLabel,
): DoctorStep {
  const title = tokenTitle(account);
  const at = attempt.target;
  const code = attempt.code ?? 'unknown error';
  if (code === 'EADDRNOTAVAIL')
    return {
      title,
      state: 'fail',
      detail: `this host does not hold ${account.localAddress ?? 'the local address'}, the localAddress of account ${account.id} (EADDRNOTAVAIL)`,
      fix: `assign the address to this host (or its pod/network), or correct localAddress of account ${account.id} in the accounts file`,
    };
  if (attempt.timedOut || TIMEOUT_CODES.has(code))
    return {
      title,
      state: 'fail',
      detail: `timeout: ${at} did not answer within ${attempt.timeoutMs} ms`,
      fix: 'check egress firewall rules toward the upstream host and the provider status; UPSTREAM_TIMEOUT_MS sets the limit',
    };
  if (DNS_CODES.has(code))
    return {
      title,
      state: 'fail',
      detail: `DNS failure: the host of ${at} does not resolve (${code})`,
      fix: "check the host name in UPSTREAM_BASE_URL and this machine's DNS resolver",
    };
  if (code === 'ECONNREFUSED')
    return {
      title,
      state: 'fail',
      detail: `connection refused by ${at} (ECONNREFUSED): nothing listens there`,
      fix: 'check the host and port of UPSTREAM_BASE_URL (is it the Payment Service API, is it up?)',
    };
  const tls = describeTlsCode(code);
  if (tls)
    return {
      title,
      state: 'fail',
      detail: `TLS failure talking to ${at}: ${tls.cause} (${code})`,
      fix: tls.fix,
    };
  if (code === 'ECONNRESET' || code === 'EPIPE')
    return {
      title,
      state: 'fail',
      detail: `${at} closed the connection (${code})`,
      fix: 'a proxy or firewall cut it, or the port does not speak the scheme of UPSTREAM_BASE_URL (http vs https)',
    };
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH')
    return {
      title,
      state: 'fail',
      detail: `no route to ${at} (${code})`,
      fix: "check this host's network and egress routing toward the upstream",
    };
  return {
    title,
    state: 'fail',
    detail: `${at} could not be reached (${code})`,
    fix: 'check UPSTREAM_BASE_URL and the network path to it',
  };
}

function diagnoseAnswer(
  attempt: Extract<TokenAttempt, { kind: 'answer' }>,
  account: AccountLabel,
): DoctorStep {
  const title = tokenTitle(account);
  const at = attempt.target;
  const status = attempt.status;
  if (status === 200 && attempt.tokenIssued) {
    const lifetime =
      attempt.accessLifetimeSeconds === undefined
        ? ''
        : `, access token valid for ${attempt.accessLifetimeSeconds} s`;
    return { title, state: 'pass', detail: `${at} issued a token pair (HTTP 200${lifetime})` };
  }
  if (status === 401 || status === 400) {
    const credentials = credentialSettings(account);
    return {
      title,
      state: 'fail',
      detail: `bad credentials: the provider refused ${credentials.names} (HTTP ${status})`,
      fix: `check ${credentials.files} for this environment; a running gateway picks up changed files on its own or on SIGHUP`,
    };
  }
  if (status === 403)
    return {
      title,
      state: 'fail',
      detail: `IP not whitelisted: the provider refused account ${account.id}, sent from ${egressOf(account)}${
        attempt.localAddress && !account.localAddress ? `, ${attempt.localAddress} on this socket` : ''
      } (HTTP 403)`,
      fix: `${whitelistAdvice(attempt.localAddress)}; for account ${account.id}`,
    };
  if (status === 404)
    return {
      title,
      state: 'fail',
      detail: `${at} has no token endpoint at /api/token/ (HTTP 404)`,
      fix: 'UPSTREAM_BASE_URL must be the base of the Payment Service API, the URL that /api/token/ follows (usually no path)',
    };
  if (status === 429)
    return {
      title,
      state: 'fail',
      detail: `${at} is rate limiting the token endpoint (HTTP 429)`,
      fix: 'wait and run the doctor again; check that no other client logs in with these credentials in a loop',
    };
  if (status >= 500)
    return {
      title,
      state: 'fail',
      detail: `${at} failed (HTTP ${status})`,
      fix: 'the provider has a problem: retry later or contact the provider',
    };
  return {
    title,
    state: 'fail',
    detail: `${at} gave an unexpected answer (HTTP ${status}${status === 200 ? ' without a token pair' : ''})`,
    fix: 'check that UPSTREAM_BASE_URL points at the Payment Service API',
  };
}

function whitelistAdvice(localAddress: string | undefined): string {
  if (!localAddress || isIP(localAddress) === 0)
    return "ask the provider to whitelist the gateway's public egress IP (the address the provider sees)";
  if (isPrivateAddress(localAddress))
    return (
      `ask the provider to whitelist the egress IP. This host reached the upstream from ${localAddress}, a private ` +
      'address: behind NAT the provider sees the public egress IP of the NAT gateway or proxy — whitelist that one'
    );
  return (
    `ask the provider to whitelist ${localAddress}, the address this host reached the upstream from ` +
    '(behind NAT the public egress IP is what the provider sees)'
  );
}

/** RFC 1918, CGNAT, loopback, link-local and unique-local IPv6 addresses: never what the provider sees. */
export function isPrivateAddress(address: string): boolean {
  const ip = address.replace(/^::ffff:/i, '');
  if (isIP(ip) === 4) {
    const [a = 0, b = 0] = ip.split('.').map(Number);
    return (
      a === 10 ||
      a === 127 ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254)
    );
  }
  const lower = ip.toLowerCase();
  return lower === '::1' || lower.startsWith('fc') || lower.startsWith('fd') || lower.startsWith('fe80');
}
