// Builds provider usage (SPEC §11): the quotas per client and account and the usage ledger, once per replica.
import type { Caller } from '../callers/caller';
import type { GatewayConfig } from '../config/gateway-config';
import { createUsage, type QuotaLimits, type Usage } from '../usage';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';
import type { Redis } from './redis';

/** Usage, and where its quotas come from once the client registry exists (it is built after the accounts). */
export interface BuiltUsage {
  readonly usage: Usage;
  /** Names the registry the quotas are read from (each call reads the entry now: a reload applies at once). */
  quotasFrom(registry: { findById(clientId: string): Caller | undefined }): void;
}

/**
 * Closed after the servers drained and before Redis closes (closers run in reverse: it is made after Redis and
 * before the servers): a graceful stop writes the ledger a last time and gives unused quota units back.
 */
export function buildUsage(
  config: GatewayConfig,
  redis: Redis,
  { logger, metrics }: Observability,
): Promise<Built<BuiltUsage>> {
  return building((closers) => {
    let findById: (clientId: string) => Caller | undefined = () => undefined;
    const usage = createUsage({
      redis: redis.client,
      keyPrefix: config.redis.keyPrefix,
      settings: config.usage,
      limitsOf: (clientId): QuotaLimits | undefined => findById(clientId)?.quota,
      logger,
      registry: metrics.registry,
    });
    closers.push(() => usage.close());
    return {
      usage,
      quotasFrom(registry) {
        findById = (clientId) => registry.findById(clientId);
      },
    };
  });
}
