// Builds the operations catalogue (SPEC §12) from OPERATIONS_FILE: loaded before anything that serves, watched after.
import { type CatalogueSource, createCatalogueSource } from '../catalogue';
import type { GatewayConfig } from '../config/gateway-config';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';

export function buildCatalogue(
  config: GatewayConfig,
  { logger, metrics }: Pick<Observability, 'logger' | 'metrics'>,
): Promise<Built<CatalogueSource>> {
  return building((closers) => {
    const catalogue = createCatalogueSource(config.callers.operationsFile, {
      logger,
      maxTimeoutMs: config.upstream.timeoutMs,
      refused: metrics.catalogueReloadFailures,
      watch: true,
    });
    closers.push(() => catalogue.close());
    logger.info(
      {
        file: config.callers.operationsFile,
        operations: catalogue.current().operations.map((operation) => operation.id),
        unserved: catalogue.current().unserved,
      },
      'operations catalogue loaded',
    );
    return catalogue;
  });
}
