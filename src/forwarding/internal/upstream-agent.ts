// Keep-alive connection pools toward the upstream, tuned once at start.
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { checkLocalAddress } from '../../tls/local-address';
import { upstreamCa } from '../../tls/upstream-trust';

export interface UpstreamAgentOptions {
  /** UPSTREAM_CA_FILE's certificates, trusted on top of the default roots. */
  readonly extraCa?: readonly string[];
  /**
   * The account's `localAddress`: every socket of the pool binds to it (hosts holding several whitelisted egress
   * addresses). Undefined: the host's default address, as the routing table chooses.
   */
  readonly localAddress?: string;
}

export function createUpstreamAgent(
  baseUrl: string,
  maxSockets: number,
  options: UpstreamAgentOptions = {},
): HttpAgent {
  checkLocalAddress(options.localAddress);
  const pool = {
    keepAlive: true,
    keepAliveMsecs: 1_000,
    maxSockets,
    // Every socket may wait free for the next call: a smaller free pool closes sockets that a busy moment returns
    // together, and the next calls open new connections instead (measured: nearly one per call at 1,000 callers).
    // Idle ones still close after `timeout`.
    maxFreeSockets: maxSockets,
    // Reuse the most recently used socket: fewer sockets stay warm, and stale ones age out.
    scheduling: 'lifo' as const,
    // Stay below the usual 5 s server-side keep-alive so the upstream never closes a socket we are about to reuse.
    timeout: 4_000,
    // Handed to every net/tls connect of the pool (and part of its socket name).
    ...(options.localAddress !== undefined && { localAddress: options.localAddress }),
  };
  if (!baseUrl.startsWith('https:')) return new HttpAgent(pool);
  const ca = upstreamCa(options.extraCa);
  return new HttpsAgent(ca ? { ...pool, ca } : pool);
}

/** Sockets the agent has handed to a call right now (idle keep-alive sockets are not counted). */
export function busySockets(agent: HttpAgent): number {
  let count = 0;
  for (const name in agent.sockets) count += agent.sockets[name]?.length ?? 0;
  return count;
}
