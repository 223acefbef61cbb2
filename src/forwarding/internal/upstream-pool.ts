// The account's keep-alive connections for the answers the gateway reads: an undici Pool, tuned once at start.
import { Pool } from 'undici';
import { type UpstreamConnectSettings, upstreamConnectOptions } from '../../tls/upstream-connect';

export interface UpstreamPoolSettings extends UpstreamConnectSettings {
  /** At most this many connections (the account's maxSockets; the upstream slots keep the pool's queue empty). */
  readonly connections: number;
}

/**
 * One pool per account and origin. Idle sockets close after 4 s, below the usual 5 s server-side keep-alive, so the
 * upstream never closes a socket the gateway is about to reuse (undici also honours a shorter `Keep-Alive: timeout`).
 * No pipelining: one call per socket at a time, as the provider's servers expect.
 */
export function createUpstreamPool(baseUrl: string, settings: UpstreamPoolSettings): Pool {
  return new Pool(new URL(baseUrl).origin, {
    ...upstreamConnectOptions(settings),
    connections: settings.connections,
    pipelining: 1,
    keepAliveTimeout: 4_000,
  });
}

/** Sockets serving a call right now (idle keep-alive sockets are not counted). */
export function poolSocketsInUse(pool: Pool): number {
  const { connected, free } = pool.stats;
  return Math.max(0, connected - free);
}
