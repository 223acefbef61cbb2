// The account's egress address (`localAddress`) for upstream sockets: checked once at build, its bind failure named.
import { isIP } from 'node:net';

/** Throws at build time (never on a request) when `localAddress` is not an IP address: a configuration mistake. */
export function checkLocalAddress(localAddress: string | undefined): void {
  if (localAddress !== undefined && isIP(localAddress) === 0)
    throw new Error(`localAddress must be an IPv4 or IPv6 address, got "${localAddress}"`);
}

/** What the host's own address is called where an account has no `localAddress`. */
export const DEFAULT_EGRESS = "the host's default address";

/** What a socket that could not bind the account's local address is logged as (never a secret in it). */
export interface BindFailure {
  readonly fields: { readonly code: 'EADDRNOTAVAIL'; readonly localAddress: string };
  readonly message: string;
}

/**
 * The bind failure under `error` (a socket error, or fetch's TypeError('fetch failed') around one): EADDRNOTAVAIL,
 * the host does not hold the local address the account's sockets bind to. Undefined for any other failure; callers
 * get the usual connection-error answer (502/503) either way.
 */
export function bindFailureOf(error: unknown): BindFailure | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current !== undefined && current !== null; depth += 1) {
    const { code, syscall, address } = current as { code?: unknown; syscall?: unknown; address?: unknown };
    if (code === 'EADDRNOTAVAIL' && syscall === 'bind' && typeof address === 'string')
      return {
        fields: { code, localAddress: address },
        message: `this host does not hold ${address}, the local address the account's upstream sockets bind to (localAddress)`,
      };
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
