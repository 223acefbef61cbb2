// Traces are configured by the standard OpenTelemetry variables: off unless an endpoint is set, typos refused at start.
import pino from 'pino';
import { ConfigError } from '../../../src/config/config-error';
import { loadConfig } from '../../../src/config/load-config';
import { startTracing } from '../../../src/observability/start-tracing';
import { NO_TRACING } from '../../../src/observability/tracing';
import { problemsOf } from '../../support/config-problems';

const local = { NODE_ENV: 'development' };

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

  it('are off with OTEL_TRACES_EXPORTER=none, the standard switch, even with an endpoint shared with other signals', () => {
    const config = loadConfig({
      ...local,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_TRACES_EXPORTER: 'none',
    });
    expect(config.tracing).toBeUndefined();
    expect(
      loadConfig({ ...local, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'otlp' })
        .tracing,
    ).toBeDefined();
  });

  it('refuse an exporter or a protocol the gateway does not speak, rather than export OTLP/HTTP regardless', () => {
    expect(
      problemsOf({ ...local, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'zipkin' }),
    ).toEqual([{ variable: 'OTEL_TRACES_EXPORTER', message: expect.stringMatching(/otlp or none/) }]);
    const grpc = problemsOf({
      ...local,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    });
    expect(grpc).toEqual([
      { variable: 'OTEL_EXPORTER_OTLP_PROTOCOL', message: expect.stringMatching(/grpc/) },
    ]);
    // The traces protocol wins over the general one, as in every OpenTelemetry SDK, both ways.
    expect(
      problemsOf({
        ...local,
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc',
      }).map((p) => p.variable),
    ).toEqual(['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL']);
    expect(
      loadConfig({
        ...local,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      }).tracing,
    ).toBeDefined();
    // Traces off: the protocol other signals' exporters use is none of the gateway's business.
    expect(loadConfig({ ...local, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).tracing).toBeUndefined();
    // Both HTTP encodings are accepted: a protocol set fleet-wide for other services does not stop the gateway.
    for (const protocol of ['http/protobuf', 'http/json'])
      expect(
        loadConfig({
          ...local,
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
        }).tracing,
      ).toBeDefined();
  });

  it('refuse a general endpoint that already names the traces path, or carries a query: spans would go nowhere', () => {
    const secret = 'tok3n-in-query';
    for (const endpoint of [
      'http://collector:4318/v1/traces',
      'http://collector:4318/v1/traces/',
      `https://collector.example.com/?api_key=${secret}`,
      'https://collector.example.com/otlp#v1',
    ]) {
      const problems = problemsOf({ ...local, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint });
      expect(problems.map((p) => p.variable)).toEqual(['OTEL_EXPORTER_OTLP_ENDPOINT']);
      expect(JSON.stringify(problems)).not.toContain(secret);
      expect(JSON.stringify(problems)).not.toContain('collector');
    }
    expect(
      problemsOf({ ...local, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/v1/traces' })[0]?.message,
    ).toMatch(/OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/);
    // A path prefix (a vendor's /otlp) is kept: <it>/v1/traces.
    expect(
      loadConfig({ ...local, OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example.com/otlp' }).tracing
        ?.tracesUrl,
    ).toBe('https://otlp.example.com/otlp/v1/traces');
  });

  describe('in production', () => {
    const production = {
      NODE_ENV: 'production',
      UPSTREAM_BASE_URL: 'https://payments.example.com',
      UPSTREAM_USERNAME: 'merchant',
      UPSTREAM_PASSWORD: 'merchant-password',
      ALLOW_MEMORY_STORE: 'true',
      METRICS_PORT: '9464',
    };
    const otlpProblems = (env: NodeJS.ProcessEnv) => {
      try {
        loadConfig({ ...production, ...env });
        return [];
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).problems.filter((p) => p.variable.startsWith('OTEL_'));
      }
    };

    it('refuse sending the collector credentials over plain http (a vendor API key in OTLP headers, or in the URL)', () => {
      const key = 'vendor-api-key-1234';
      for (const env of [
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://api.vendor.example',
          OTEL_EXPORTER_OTLP_HEADERS: `x-api-key=${key}`,
        },
        {
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://api.vendor.example/v1/traces',
          OTEL_EXPORTER_OTLP_TRACES_HEADERS: `x-api-key=${key}`,
        },
        { OTEL_EXPORTER_OTLP_ENDPOINT: `http://bff:${key}@collector.example:4318` },
      ]) {
        const problems = otlpProblems(env);
        expect(problems.map((p) => p.variable)).toEqual([
          env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
            ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
            : 'OTEL_EXPORTER_OTLP_ENDPOINT',
        ]);
        expect(problems[0]?.message).toMatch(/https/);
        expect(JSON.stringify(problems)).not.toContain(key);
      }
    });

    it('accept plain http to a collector without credentials (a node agent), or to a loopback sidecar, and https always', () => {
      expect(otlpProblems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector:4318' })).toEqual([]);
      expect(
        otlpProblems({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
          OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=k',
        }),
      ).toEqual([]);
      expect(
        otlpProblems({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318',
          OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=k',
        }),
      ).toEqual([]);
      expect(
        otlpProblems({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'https://api.vendor.example',
          OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=k',
        }),
      ).toEqual([]);
    });
  });
});
