// The CAs trusted for the upstream: Node's default roots plus UPSTREAM_CA_FILE. Verification is never switched off.
import { getCACertificates } from 'node:tls';

/**
 * `ca` for every TLS client toward the upstream (forwarder agent, token client, doctor). Node's `ca` option
 * replaces the default roots, so they are listed first: a public provider certificate still verifies.
 */
export function upstreamCa(extraCa: readonly string[] | undefined): string[] | undefined {
  if (!extraCa || extraCa.length === 0) return undefined;
  return [...getCACertificates('default'), ...extraCa];
}
