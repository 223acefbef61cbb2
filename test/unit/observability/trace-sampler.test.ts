// Who decides which traces are kept: with traceidratio the gateway draws by itself, a caller's trace id cannot steer it.
import { ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api';
import { SamplingDecision } from '@opentelemetry/sdk-trace';
import type { TracingSettings } from '../../../src/config/gateway-config';
import { samplerOf } from '../../../src/observability/otel-tracing';

const settings = (sampler: string, samplerRatio: number): TracingSettings => ({
  tracesUrl: 'http://127.0.0.1:4318/v1/traces',
  serviceName: 'bff',
  sampler,
  samplerRatio,
  exportDelayMs: 5_000,
  propagateUpstream: false,
});

/** A trace id whose TraceIdRatioBased hash is 1: the stock sampler keeps it at any ratio above 2.4e-10. */
const CHOSEN_TRACE = '00000000000000000000000000000001';

const underParent = (isRemote: boolean, traceFlags: TraceFlags) =>
  trace.setSpanContext(ROOT_CONTEXT, {
    traceId: CHOSEN_TRACE,
    spanId: '00f067aa0ba902b7',
    traceFlags,
    isRemote,
  });

const decide = (sampler: string, ratio: number, context = ROOT_CONTEXT, traceId = CHOSEN_TRACE) =>
  samplerOf(settings(sampler, ratio)).shouldSample(context, traceId, 'GET', SpanKind.SERVER, {}, []).decision;

describe('trace sampler', () => {
  it("traceidratio: a caller's chosen trace id (or sampled flag) does not make the gateway keep its requests", () => {
    // One in a billion: a pass would be a draw, not the caller's choice (the stock sampler keeps every one of these).
    const ratio = 1e-9;
    for (let i = 0; i < 20; i++) {
      expect(decide('traceidratio', ratio, underParent(true, TraceFlags.SAMPLED))).toBe(
        SamplingDecision.NOT_RECORD,
      );
      expect(decide('traceidratio', ratio, underParent(true, TraceFlags.NONE))).toBe(
        SamplingDecision.NOT_RECORD,
      );
    }
  });

  it('traceidratio: the children of a kept span are kept, those of a dropped one dropped (whole trees)', () => {
    expect(decide('traceidratio', 1e-9, underParent(false, TraceFlags.SAMPLED))).toBe(
      SamplingDecision.RECORD_AND_SAMPLED,
    );
    expect(decide('traceidratio', 1, underParent(false, TraceFlags.NONE))).toBe(SamplingDecision.NOT_RECORD);
  });

  it('traceidratio keeps everything at 1 and nothing at 0, whoever calls', () => {
    expect(decide('traceidratio', 1, underParent(true, TraceFlags.NONE))).toBe(
      SamplingDecision.RECORD_AND_SAMPLED,
    );
    expect(decide('traceidratio', 1)).toBe(SamplingDecision.RECORD_AND_SAMPLED);
    expect(decide('traceidratio', 0, underParent(true, TraceFlags.SAMPLED))).toBe(
      SamplingDecision.NOT_RECORD,
    );
  });

  it("parentbased_*: the caller's sampled flag decides (W3C), as documented", () => {
    expect(decide('parentbased_traceidratio', 1e-9, underParent(true, TraceFlags.SAMPLED))).toBe(
      SamplingDecision.RECORD_AND_SAMPLED,
    );
    expect(decide('parentbased_always_on', 1, underParent(true, TraceFlags.NONE))).toBe(
      SamplingDecision.NOT_RECORD,
    );
  });
});
