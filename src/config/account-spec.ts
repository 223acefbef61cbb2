// One provider account as configuration describes it (SPEC §10): where the provider is, whose credentials, how the
// account's sockets behave. The accounts file (UPSTREAM_ACCOUNTS_FILE) yields several; the single-account variables
// of §5–§7 yield one named `default`.

/** The account's budget as read (src/config/budget-schema.ts): burst and shares filled in with their defaults. */
import type { AccountBudget } from './budget-schema';
import type { CredentialSettings, GatewayConfig } from './gateway-config';

export type { AccountBudget };

/** Lower-case letters, digits and dashes (an id appears in headers, metric labels and Redis keys). */
export const ACCOUNT_ID_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;

/** The account the single-account variables describe, and the one every caller uses when only it exists. */
export const DEFAULT_ACCOUNT_ID = 'default';

export interface AccountSpec {
  readonly id: string;
  /** Canonical base URL (lower-case scheme and host, no default port, no trailing slash). */
  readonly baseUrl: string;
  /** Inline values (single-account variables, local mode) or files re-read on change and on SIGHUP. */
  readonly credentials: CredentialSettings;
  /** PEM certificates trusted for this account's provider on top of the default roots. */
  readonly extraCa?: readonly string[];
  readonly staticHeaders: Readonly<Record<string, string>>;
  /** Local address every upstream socket of this account binds to (token calls and forwarded calls). */
  readonly localAddress?: string;
  readonly maxSockets: number;
  readonly timeoutMs: number;
  /** The provider's limit for this account, fleet-wide (SPEC §11); carried for the budget module, absent = none. */
  readonly budget?: AccountBudget;
  /** Which final provider answers are billable (quota and ledger), e.g. ["2xx","4xx","!401","!403","!429"] (the
   * default when absent). Validated by billableProblems. */
  readonly billable?: readonly string[];
}

/** Where the set of accounts comes from: the accounts file (watched), or the fixed single account. */
export interface AccountSpecSource {
  /** The current set; throws a ConfigError naming what is wrong (never a secret) when it is not valid. */
  read(): Promise<readonly AccountSpec[]>;
  /** Calls `onChange` when the set may have changed (a watched file); returns how to stop watching. */
  watch(onChange: () => void): () => void;
}

/** The one account of a deployment without an accounts file: today's single-account variables, unchanged. */
export function defaultAccountSpec(config: GatewayConfig, baseUrl: string): AccountSpec {
  return {
    id: DEFAULT_ACCOUNT_ID,
    baseUrl,
    credentials: config.credentials,
    extraCa: config.upstream.extraCa,
    staticHeaders: config.upstream.staticHeaders,
    maxSockets: config.upstream.maxSockets,
    timeoutMs: config.upstream.timeoutMs,
  };
}

/** A source that never changes: the single-account deployment, and tests. */
export function fixedAccountSpecSource(specs: readonly AccountSpec[]): AccountSpecSource {
  return { read: async () => specs, watch: () => () => {} };
}
