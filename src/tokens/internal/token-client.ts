// Calls the upstream token endpoints (login and refresh) and turns every failure into a GatewayError reason.
import { Agent, fetch as undiciFetch } from 'undici';
import { GatewayError } from '../../http/gateway-error';
import { checkLocalAddress } from '../../tls/local-address';
import { needsOwnPool, upstreamConnectOptions } from '../../tls/upstream-connect';
import type { RefusalReason } from './login-backoff';

export interface TokenResponse {
  readonly access: string;
  /** Always present after a login; after a refresh only when the upstream rotates refresh tokens. */
  readonly refresh?: string;
}

export interface UpstreamCredentials {
  readonly username: string;
  readonly password: string;
}

/** The provider's two token endpoints. Rejections are GatewayErrors that never carry a token or credential. */
export interface TokenClient {
  login(credentials: UpstreamCredentials): Promise<TokenResponse>;
  /** Rejects with UPSTREAM_AUTH_FAILED when the refresh token is invalid or expired (then log in instead). */
  refresh(refreshToken: string): Promise<TokenResponse>;
  /** Closes its own connection pool, if it made one (UPSTREAM_CA_FILE). */
  close?(): Promise<void>;
}

export interface TokenClientOptions {
  /** The upstream base URL, without a trailing slash. */
  readonly baseUrl: string;
  readonly timeoutMs: number;
  /** Configured static upstream headers (e.g. `x-version`). */
  readonly headers?: Readonly<Record<string, string>>;
  /** UPSTREAM_CA_FILE's certificates: trusted on top of the default roots, as the forwarder's agent does. */
  readonly extraCa?: readonly string[];
  /**
   * The account's `localAddress`: every token call's socket binds to it (an own pool, as with extraCa). Undefined:
   * the host's default address.
   */
  readonly localAddress?: string;
  /** Injectable for tests; the global fetch (undici, keep-alive connections) by default. */
  readonly fetch?: typeof fetch;
}

const DETAIL = {
  loginRefused:
    "The upstream refused the gateway credentials of this account (check its username and password: UPSTREAM_USERNAME / UPSTREAM_PASSWORD, or the account's usernameFile / passwordFile in UPSTREAM_ACCOUNTS_FILE).",
  refreshRefused: 'The upstream refused the refresh token.',
  ipRefused:
    "The upstream refused the gateway's IP address: ask the provider to whitelist the gateway's egress IP.",
  timeout: 'The upstream token endpoint did not answer in time.',
  unreachable: 'The upstream token endpoint could not be reached.',
  unbound:
    "The upstream token endpoint could not be reached: this host does not hold the account's local address (localAddress).",
  badAnswer: 'The upstream token endpoint gave an unexpected answer.',
};

/** Retry-After as whole seconds: delta-seconds or an HTTP date; 0 when absent or unreadable. */
/** The provider's login endpoint, after UPSTREAM_BASE_URL (the doctor probes the same one). */
export const LOGIN_PATH = '/api/token/';

export function retryAfterSeconds(value: string | null, now = Date.now()): number {
  if (!value) return 0;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? 0 : Math.max(0, Math.ceil((date - now) / 1000));
}

/**
 * The fetch the token calls go through: the injected one, the global fetch, or with UPSTREAM_CA_FILE or a
 * localAddress undici's own fetch on a pool that trusts the file (the same roots + file; the global fetch takes no
 * CA) and binds every socket to the address. That pool's connect (TLS handshake included) is bounded by the call's
 * own timeout: a handshake that stalls would otherwise hold close(), and so the replica's shutdown, for undici's
 * default 10 s.
 */
function tokenFetch(options: TokenClientOptions): { doFetch: typeof fetch; close(): Promise<void> } {
  if (options.fetch || !needsOwnPool(options))
    return { doFetch: options.fetch ?? fetch, close: async () => undefined };
  const dispatcher = new Agent(upstreamConnectOptions({ ...options, connectTimeoutMs: options.timeoutMs }));
  const doFetch = ((url: string, init: RequestInit) =>
    undiciFetch(url, { ...(init as object), dispatcher })) as unknown as typeof fetch;
  return {
    doFetch,
    close: async () => {
      await dispatcher.close();
    },
  };
}

/**
 * The refusal a token endpoint status is: 401 (and 400, simplejwt's answer to a missing or blank field: a refusal
 * of what we sent) the credentials, 403 the IP address. The doctor reads a login answer the same way.
 */
export function refusalOfStatus(status: number): RefusalReason | undefined {
  if (status === 401 || status === 400) return 'UPSTREAM_AUTH_FAILED';
  if (status === 403) return 'UPSTREAM_IP_NOT_WHITELISTED';
  return undefined;
}

/** The socket error code under fetch's TypeError('fetch failed'), e.g. EADDRNOTAVAIL. */
function networkCode(error: unknown): string | undefined {
  const code = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return typeof code === 'string' ? code : undefined;
}

export function createTokenClient(options: TokenClientOptions): TokenClient {
  checkLocalAddress(options.localAddress);
  const { doFetch, close } = tokenFetch(options);
  const headers = {
    ...options.headers,
    'content-type': 'application/json',
    accept: 'application/json',
  };

  async function call(path: string, body: object, refused: string): Promise<TokenResponse> {
    let response: Response;
    try {
      response = await doFetch(`${options.baseUrl}${path}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        // A redirect would re-send the credentials to wherever it points.
        redirect: 'error',
        signal: AbortSignal.timeout(options.timeoutMs),
      });
    } catch (error) {
      // A DOMException: not always `instanceof Error` (other realms, e.g. test sandboxes), so check the name.
      const name = (error as { name?: unknown } | undefined)?.name;
      const timedOut = name === 'TimeoutError' || name === 'AbortError';
      // The cause is a network error (no request body in it), kept for the logs.
      if (timedOut) throw new GatewayError('UPSTREAM_TIMEOUT', DETAIL.timeout, { cause: error });
      const unbound = options.localAddress !== undefined && networkCode(error) === 'EADDRNOTAVAIL';
      throw new GatewayError('UPSTREAM_UNAVAILABLE', unbound ? DETAIL.unbound : DETAIL.unreachable, {
        cause: error,
      });
    }
    let answer: unknown;
    try {
      answer = await response.json();
    } catch {
      answer = undefined;
    }
    const refusal = refusalOfStatus(response.status);
    if (refusal === 'UPSTREAM_AUTH_FAILED') throw new GatewayError(refusal, refused);
    if (refusal === 'UPSTREAM_IP_NOT_WHITELISTED') throw new GatewayError(refusal, DETAIL.ipRefused);
    if (!response.ok) {
      // A 429's Retry-After (seconds) travels with the error: the token manager's back-off honours it.
      const retryAfter = response.status === 429 ? retryAfterSeconds(response.headers.get('retry-after')) : 0;
      throw new GatewayError('UPSTREAM_UNAVAILABLE', `${DETAIL.unreachable} (HTTP ${response.status})`, {
        headers: retryAfter > 0 ? { 'Retry-After': String(retryAfter) } : undefined,
      });
    }
    const { access, refresh } = (answer ?? {}) as { access?: unknown; refresh?: unknown };
    if (
      typeof access !== 'string' ||
      access === '' ||
      (refresh !== undefined && typeof refresh !== 'string')
    ) {
      throw new GatewayError('UPSTREAM_UNAVAILABLE', DETAIL.badAnswer);
    }
    return refresh ? { access, refresh } : { access };
  }

  return {
    async login(credentials) {
      const answer = await call(
        LOGIN_PATH,
        { username: credentials.username, password: credentials.password },
        DETAIL.loginRefused,
      );
      if (!answer.refresh) throw new GatewayError('UPSTREAM_UNAVAILABLE', DETAIL.badAnswer);
      return answer;
    },
    refresh: (refreshToken) => call('/api/token/refresh/', { refresh: refreshToken }, DETAIL.refreshRefused),
    close,
  };
}
