// Readiness: can this replica serve now? A load balancer sends traffic only to a replica that says yes.
import type { ClientRegistry } from '../callers/client-registry';
import type { TokenProvider } from '../tokens';

export type CheckState = 'ok' | 'degraded' | 'failing';

export interface ReadinessReport {
  readonly status: 'ready' | 'degraded' | 'not-ready';
  readonly checks: {
    readonly draining: boolean;
    readonly store: { readonly state: CheckState; readonly kind: 'redis' | 'memory' };
    readonly upstreamToken: { readonly state: CheckState; readonly detail: string };
    /** Each operation's upstream circuit. */
    readonly circuits: Readonly<Record<string, { readonly state: string }>>;
    readonly clientRegistry?: {
      readonly state: CheckState;
      readonly detail: string;
      /** ISO time of the first failed reload since the registry last matched CLIENTS_FILE. */
      readonly staleSince?: string;
    };
  };
}

export interface Readiness {
  report(): ReadinessReport;
  startDraining(): void;
  readonly draining: boolean;
}

export interface ReadinessDeps {
  /** `getAccessToken`, when given, lets a failing replica retry on its own (see below). */
  readonly tokens: Pick<TokenProvider, 'status'> & Partial<Pick<TokenProvider, 'getAccessToken'>>;
  readonly storeKind: 'redis' | 'memory';
  /** The upstream circuit state of each operation. */
  readonly circuitStates: () => Readonly<Record<string, string>>;
  /** Live store health: the token manager learns of a recovered Redis only on its next store call. */
  readonly storeHealthy?: () => boolean;
  readonly clientRegistry?: Pick<ClientRegistry, 'health'>;
}

/** Token failures that mean the provider refuses this gateway, not that it is briefly unreachable. */
const GATEWAY_REFUSALS = new Set(['UPSTREAM_AUTH_FAILED', 'UPSTREAM_IP_NOT_WHITELISTED']);

export function createReadiness(deps: ReadinessDeps): Readiness {
  let draining = false;
  let retrying = false;

  /**
   * A replica that is not ready gets no traffic, so nothing would ever ask for a token again: the probe itself
   * starts one token request at a time. The token manager's fleet-wide login back-off (after a 401/403) bounds
   * how often that reaches the upstream. A healthy replica is never made to log in by a probe.
   */
  const retryInBackground = () => {
    const get = deps.tokens.getAccessToken;
    if (retrying || draining || !get) return;
    retrying = true;
    get.call(deps.tokens).then(
      () => {
        retrying = false;
      },
      () => {
        retrying = false;
      },
    );
  };

  return {
    get draining() {
      return draining;
    },
    startDraining() {
      draining = true;
    },
    report() {
      const token = deps.tokens.status();
      const storeOk = deps.storeHealthy ? deps.storeHealthy() : token.storeHealthy;
      const storeState: CheckState = deps.storeKind === 'memory' || storeOk ? 'ok' : 'degraded';
      // Only a refusal of the gateway itself (credentials, IP) takes a replica out: a passing upstream outage
      // would take the whole fleet out at once and turn envelopes into load-balancer errors.
      const refused = token.lastFailure !== undefined && GATEWAY_REFUSALS.has(token.lastFailure);
      const tokenState: CheckState = token.hasValidToken
        ? 'ok'
        : refused
          ? 'failing'
          : token.lastFailure
            ? 'degraded'
            : 'ok';
      const tokenDetail = token.hasValidToken
        ? 'a valid upstream token is held'
        : token.lastFailure
          ? `the last upstream token request failed (${token.lastFailure}); retrying in the background`
          : 'no token yet; one is fetched on the first call';
      if (tokenState !== 'ok') retryInBackground();
      const circuits: Record<string, { state: string }> = {};
      let circuitsClosed = true;
      for (const [operation, state] of Object.entries(deps.circuitStates())) {
        circuits[operation] = { state };
        if (state !== 'closed') circuitsClosed = false;
      }
      const registry = deps.clientRegistry && registryCheck(deps.clientRegistry);
      const notReady = draining || tokenState === 'failing';
      const degraded =
        storeState !== 'ok' || tokenState !== 'ok' || !circuitsClosed || registry?.state === 'degraded';
      return {
        status: notReady ? 'not-ready' : degraded ? 'degraded' : 'ready',
        checks: {
          draining,
          store: { state: storeState, kind: deps.storeKind },
          upstreamToken: { state: tokenState, detail: tokenDetail },
          circuits,
          ...(registry && { clientRegistry: registry }),
        },
      };
    },
  };
}

/**
 * A registry that failed to reload only degrades: the replica still authenticates with the last good registry, and
 * taking every replica out at once (they all read the same file) would stop all traffic over a typo.
 */
function registryCheck(
  registry: Pick<ClientRegistry, 'health'>,
): NonNullable<ReadinessReport['checks']['clientRegistry']> {
  const { staleSince, lastFailure } = registry.health();
  if (staleSince === undefined) return { state: 'ok', detail: 'the client registry matches CLIENTS_FILE' };
  const since = new Date(staleSince).toISOString();
  return {
    state: 'degraded',
    staleSince: since,
    detail:
      `CLIENTS_FILE could not be reloaded since ${since} (${lastFailure}); serving the last good ` +
      'registry, so keys removed from the file still work until it is fixed (see the error log)',
  };
}
