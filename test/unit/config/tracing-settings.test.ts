// Traces are configured by the standard OpenTelemetry variables: off unless an endpoint is set, typos refused at start.
import pino from 'pino';
import { ConfigError } from '../../../src/config/config-error';
import { loadConfig } from '../../../src/config/load-config';
import { startTracing } from '../../../src/observability/start-tracing';
import { NO_TRACING } from '../../../src/observability/tracing';

const local = { NODE_ENV: 'development' };

function problemsOf(env: NodeJS.ProcessEnv): { variable: string; message: string }[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  throw new Error('expected a ConfigError');
}

describe('tracing settings', () => {
  it('are off without an OTLP endpoint, whatever else is set', () => {
    const config = loadConfig({ ...local, OTEL_SERVICE_NAME: 'bff', UPSTREAM_PROPAGATE_TRACE: 'true' });
    expect(config.tracing).toBeUndefined();
    expect(startTracing(config.tracing, '0.1.0', pino({ level: 'silent' }))).toBe(NO_TRACING);
  });

  it('send traces to <endpoint>/v1/traces, with the standard defaults', () => {
    expect(loadConfig({ ...local, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toEqual({
      tracesUrl: 'http://collector:4318/v1/traces',
      serviceName: 'payments-bff-gateway',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
      exportDelayMs: 5_000,
      propagateUpstream: false,
    });
  });

  it('take the traces endpoint as it is, before the general one', () => {
    const config = loadConfig({
      ...local,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example.com/otlp/spans',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      UPSTREAM_PROPAGATE_TRACE: 'true',
    });
    expect(config.tracing).toMatchObject({
      tracesUrl: 'https://traces.example.com/otlp/spans',
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
      propagateUpstream: true,
    });
  });

  it('are off with OTEL_SDK_DISABLED=true even with an endpoint', () => {
    const config = loadConfig({
      ...local,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_SDK_DISABLED: 'true',
    });
    expect(config.tracing).toBeUndefined();
  });

  it("refuse an operator's typos at start, naming the variable and never its value", () => {
    const problems = problemsOf({
      ...local,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
      OTEL_TRACES_SAMPLER: 'sometimes',
      OTEL_TRACES_SAMPLER_ARG: '2',
      UPSTREAM_PROPAGATE_TRACE: 'maybe',
    });
    expect(problems.map((p) => p.variable).sort()).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_TRACES_SAMPLER',
      'OTEL_TRACES_SAMPLER_ARG',
      'UPSTREAM_PROPAGATE_TRACE',
    ]);
    expect(JSON.stringify(problems)).not.toContain('collector:4318');
  });
});
