// Session store failures (Redis unreachable) turned into 503 answers.
import { GatewayError } from '../http/gateway-error';

/**
 * The same store, its failures turned into 503 answers: a session that cannot be read is neither trusted nor
 * declared ended, and the browser is told to retry rather than to log in again.
 */
export function answeringStoreOutages<T extends object>(store: T): T {
  const wrapped = { ...store } as Record<string, unknown>;
  for (const [name, method] of Object.entries(store)) {
    if (typeof method !== 'function') continue;
    wrapped[name] = (...args: unknown[]) => {
      const result = (method as (...a: unknown[]) => unknown).apply(store, args);
      if (!(result instanceof Promise)) return result;
      return result.catch((error: unknown) => {
        throw new GatewayError(
          'UPSTREAM_UNAVAILABLE',
          'The session store cannot be reached; try again shortly.',
          {
            status: 503,
            headers: { 'Retry-After': '1' },
            cause: error,
          },
        );
      });
    };
  }
  return wrapped as T;
}
