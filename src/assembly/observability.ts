// Builds the logger, the metrics and the traces every other builder reports to.
import type { DestinationStream, Logger } from 'pino';
import type { GatewayConfig } from '../config/gateway-config';
import { createLogger } from '../observability/logger';
import { createMetrics, type Metrics } from '../observability/metrics';
import { startTracing } from '../observability/start-tracing';
import type { Tracing } from '../observability/tracing';

export interface Observability {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Off (and free) unless an OTLP endpoint is configured; the caller closes it last. */
  readonly tracing: Tracing;
}

export function buildObservability(
  config: GatewayConfig,
  version: string,
  logStream?: DestinationStream,
): Observability {
  const logger = createLogger({ level: config.log.level, file: config.log.file, stream: logStream });
  return { logger, metrics: createMetrics(), tracing: startTracing(config.tracing, version, logger) };
}
