// Decides which upstream the gateway talks to: the configured provider, or the local-mode simulator handed in.
import type { GatewayConfig } from '../config/gateway-config';
import type { CredentialSource } from '../tokens';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';

/** The bundled simulator standing in for the provider; src/local-mode.ts starts it (never production start-up). */
export interface LocalUpstream {
  readonly baseUrl: string;
  readonly credentials: CredentialSource;
  close(): Promise<void>;
}

export interface Upstream {
  readonly baseUrl: string;
  /** Set in local mode: the simulator's development credentials. */
  readonly credentials?: CredentialSource;
  /** The simulator URL in local mode. */
  readonly simulatorUrl?: string;
}

export function resolveUpstream(
  config: GatewayConfig,
  local: LocalUpstream | undefined,
  { logger }: Observability,
): Promise<Built<Upstream>> {
  return building((closers) => {
    if (local) closers.push(() => local.close());
    if (config.mode === 'upstream' && config.upstream.baseUrl) return { baseUrl: config.upstream.baseUrl };
    if (!local) throw new Error('local mode needs the bundled simulator: start it with startLocalUpstream()');
    logger.warn(
      { simulator: local.baseUrl },
      'local mode: the upstream is the bundled Payment API simulator',
    );
    return { baseUrl: local.baseUrl, simulatorUrl: local.baseUrl, credentials: local.credentials };
  });
}
