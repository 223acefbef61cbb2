// Builds the logger and the metrics every other builder reports to.
import type { DestinationStream, Logger } from 'pino';
import type { GatewayConfig } from '../config/gateway-config';
import { createLogger } from '../observability/logger';
import { createMetrics, type Metrics } from '../observability/metrics';

export interface Observability {
  readonly logger: Logger;
  readonly metrics: Metrics;
}

export function buildObservability(config: GatewayConfig, logStream?: DestinationStream): Observability {
  return {
    logger: createLogger({ level: config.log.level, file: config.log.file, stream: logStream }),
    metrics: createMetrics(),
  };
}
