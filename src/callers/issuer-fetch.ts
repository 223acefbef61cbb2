// Fetches from the OIDC issuer that remember a failure for a few seconds, so a burst of bearer requests during an
// issuer outage costs the issuer one request, not one per inbound request.

/** How long a failed discovery or JWKS fetch is answered from memory. Default 5 s. */
export const DEFAULT_ISSUER_FAILURE_MEMORY_MS = 5_000;

type Fetch = typeof fetch;

/** Thrown instead of asking the issuer again: the latest failure (its cause) is still fresh. */
class IssuerFailureRemembered extends Error {
  constructor(cause: unknown) {
    super('the OIDC issuer failed moments ago; not asked again yet', { cause });
    this.name = 'IssuerFailureRemembered';
  }
}

export interface FailureMemory {
  /** Throws IssuerFailureRemembered while the latest failure is fresh. */
  check(): void;
  remember(error: unknown): void;
}

/** One remembered failure (the latest) with its expiry; `onFailure` hears of each real one (not those from memory). */
export function failureMemory(
  durationMs: number,
  onFailure: (error: unknown) => void = () => undefined,
  now: () => number = Date.now,
): FailureMemory {
  let failure: unknown;
  let until = 0;
  return {
    check() {
      if (now() < until) throw new IssuerFailureRemembered(failure);
    },
    remember(error) {
      failure = error;
      until = now() + durationMs;
      onFailure(error);
    },
  };
}

/**
 * A fetch for jose's `customFetch` (createRemoteJWKSet): jose itself remembers only successes, so after a failed
 * fetch every request would fetch again. Here a connection error, a non-200 answer or a body that is not a JSON key
 * set is remembered for `memory`'s duration, and answered from memory (an Error, which the verifier reports as
 * "issuer keys unavailable") without a request. A good answer is handed back to jose unchanged.
 */
export function jwksFetchRememberingFailures(memory: FailureMemory, fetchImpl: Fetch = fetch) {
  return async (url: string, init: RequestInit): Promise<Response> => {
    memory.check();
    try {
      const response = await fetchImpl(url, init);
      if (response.status !== 200) throw new Error(`the JWKS endpoint answered ${response.status}`);
      const body = await response.text();
      const parsed = JSON.parse(body) as { keys?: unknown };
      if (!Array.isArray(parsed?.keys)) throw new Error('the JWKS endpoint answered no key set');
      return new Response(body, { status: 200, headers: response.headers });
    } catch (error) {
      memory.remember(error);
      throw error;
    }
  };
}
