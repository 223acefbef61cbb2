// Who is calling: the identity the authentication step attaches to each request.
import type { Priority } from '../config/budget-schema';

export type Scope = 'documents:validate' | 'plans:read';

export const SCOPES: readonly Scope[] = ['documents:validate', 'plans:read'];

export interface Caller {
  /** Client id from the registry, or the `azp` / `client_id` of an SSO token. Used for limits, logs and metrics. */
  readonly id: string;
  readonly scopes: ReadonlySet<string>;
  readonly via: 'api-key' | 'oidc' | 'session';
  /** A browser session's user, as a keyed reference (never the raw subject): counted per user too. */
  readonly user?: string;
  /** A browser session user's own limit inside the web app's (the registry entry's `session.userRateLimit`). */
  readonly userRateLimit?: { readonly limit: number; readonly windowSeconds: number };
  /** Per-client rate limit from the registry, when it sets one. */
  readonly rateLimit?: { readonly limit: number; readonly windowSeconds: number };
  /** Its place in an account's provider budget (registry `priority`); absent: standard. */
  readonly priority?: Priority;
  /** Billable provider calls per calendar day/month in its timezone, per account (the registry entry's `quota`). */
  readonly quota?: CallerQuota;
  /**
   * Provider accounts this client may use (SPEC §10), its default first; absent when its entry lists none (it may
   * then use the only account, when exactly one is configured).
   */
  readonly accounts?: readonly string[];
  /** Browser origins this client's web app is served from (CORS). */
  readonly origins: readonly string[];
}

/** A registry quota, validated: whole numbers of calls, a timezone Intl knows (UTC when the entry names none). */
export interface CallerQuota {
  readonly day?: number;
  readonly month?: number;
  readonly timeZone: string;
}
