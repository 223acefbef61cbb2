// Traces on or off: the OpenTelemetry SDK is loaded only when an OTLP endpoint is set.
import type { Logger } from 'pino';
import type { TracingSettings } from '../config/gateway-config';
import type { createOtelTracing } from './otel-tracing';
import { NO_TRACING, type Tracing } from './tracing';

/** The SDK-backed tracing when `settings` are given (an OTLP endpoint is configured), NO_TRACING otherwise. */
export function startTracing(
  settings: TracingSettings | undefined,
  version: string,
  logger: Logger,
): Tracing {
  if (!settings) return NO_TRACING;
  // Required here, not imported at the top: a gateway without an OTLP endpoint never loads the OpenTelemetry SDK.
  const otel = require('./otel-tracing') as { createOtelTracing: typeof createOtelTracing };
  return otel.createOtelTracing(settings, version, logger);
}
