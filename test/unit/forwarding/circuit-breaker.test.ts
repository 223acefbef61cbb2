// The circuit's rules in isolation: minimum calls, the ratio, what counts, the fast answer while a probe runs.
import {
  CircuitOpenError,
  createUpstreamCircuit,
  createUpstreamCircuits,
  UpstreamFailure,
} from '../../../src/forwarding/internal/circuit-breaker';

const settings = { failureRatio: 0.5, windowMs: 60_000, minimumCalls: 4, resetMs: 100 };
const fail = () => Promise.reject(new UpstreamFailure('status'));
const succeed = () => Promise.resolve('ok');

describe('upstream circuit', () => {
  it('stays closed below the minimum number of calls, however many of them failed', async () => {
    const circuit = createUpstreamCircuit(settings);
    for (let i = 0; i < 3; i++) await expect(circuit.run(fail)).rejects.toBeInstanceOf(UpstreamFailure);
    expect(circuit.state).toBe('closed');
    await expect(circuit.run(fail)).rejects.toBeInstanceOf(UpstreamFailure);
    expect(circuit.state).toBe('open');
    await expect(circuit.run(succeed)).rejects.toBeInstanceOf(CircuitOpenError);
  });

  it('opens only above the failure ratio', async () => {
    const circuit = createUpstreamCircuit(settings);
    for (let i = 0; i < 10; i++) await circuit.run(succeed);
    for (let i = 0; i < 10; i++) await expect(circuit.run(fail)).rejects.toThrow();
    expect(circuit.state).toBe('closed'); // 10 of 20: not above one half
    await expect(circuit.run(fail)).rejects.toBeInstanceOf(UpstreamFailure);
    expect(circuit.state).toBe('open');
  });

  it('counts only upstream failures: other errors (a 403 refusal, say) are not the upstream failing', async () => {
    const circuit = createUpstreamCircuit(settings);
    for (let i = 0; i < 10; i++)
      await expect(circuit.run(() => Promise.reject(new Error('403')))).rejects.toThrow();
    expect(circuit.state).toBe('closed');
  });

  it('answers other calls at once while the probe is in flight, and closes when the probe succeeds', async () => {
    const circuit = createUpstreamCircuit(settings);
    for (let i = 0; i < 4; i++) await expect(circuit.run(fail)).rejects.toThrow();
    await new Promise((resolve) => setTimeout(resolve, settings.resetMs + 20));
    let finishProbe: (value: string) => void = () => undefined;
    const probe = circuit.run(() => new Promise<string>((resolve) => (finishProbe = resolve)));
    expect(circuit.state).toBe('half-open');
    let ran = false;
    await expect(
      circuit.run(async () => {
        ran = true;
        return 'x';
      }),
    ).rejects.toBeInstanceOf(CircuitOpenError);
    expect(ran).toBe(false);
    finishProbe('ok');
    await expect(probe).resolves.toBe('ok');
    expect(circuit.state).toBe('closed');
  });

  it('keeps one circuit per operation and reports each', async () => {
    const changes: string[] = [];
    const circuits = createUpstreamCircuits(['validation', 'plan'], {
      ...settings,
      onStateChange: (operation, state) => changes.push(`${operation}:${state}`),
    });
    for (let i = 0; i < 4; i++) await expect(circuits.of('validation').run(fail)).rejects.toThrow();
    expect(circuits.states()).toEqual({ validation: 'open', plan: 'closed' });
    await expect(circuits.of('plan').run(succeed)).resolves.toBe('ok');
    expect(changes).toEqual(['validation:open']);
  });
});
