// How every undici pool toward the upstream connects (the forwarder's per-account pool, the token client's own pool):
// the trusted CAs, the account's egress address and a bounded connect, built in one place so both clients agree.
import { checkLocalAddress } from './local-address';
import { upstreamCa } from './upstream-trust';

export interface UpstreamConnectSettings {
  /** UPSTREAM_CA_FILE's certificates, trusted on top of the default roots (verification is never off). */
  readonly extraCa?: readonly string[];
  /** The account's `localAddress`: every socket binds to it. Undefined: the address the routing table chooses. */
  readonly localAddress?: string;
  /** Bound on a connect, TLS handshake included (undici's default is 10 s). */
  readonly connectTimeoutMs: number;
}

/** The part of undici's Client/Pool/Agent options that says how a socket to the upstream is made. */
export interface UpstreamConnectOptions {
  readonly localAddress?: string;
  readonly connect: { readonly ca?: string[]; readonly timeout: number };
}

/** Throws at build time when `localAddress` is not an IP address (a configuration mistake, never a request's). */
export function upstreamConnectOptions(settings: UpstreamConnectSettings): UpstreamConnectOptions {
  checkLocalAddress(settings.localAddress);
  const ca = upstreamCa(settings.extraCa);
  return {
    ...(settings.localAddress !== undefined && { localAddress: settings.localAddress }),
    connect: { ...(ca && { ca }), timeout: settings.connectTimeoutMs },
  };
}

/** Whether the settings differ from the process-wide defaults (no extra CA, no egress address). */
export function needsOwnPool(settings: Omit<UpstreamConnectSettings, 'connectTimeoutMs'>): boolean {
  return (settings.extraCa?.length ?? 0) > 0 || settings.localAddress !== undefined;
}
