// The gate in front of a hung store, under a fake clock: how long it stays shut, and who tries the store again.
import { SlowStoreGate } from '../../../src/tokens/internal/slow-store-gate';

const RETRY_MS = 2_000;

function gateAt(start: number) {
  let now = start;
  const gate = new SlowStoreGate(RETRY_MS, () => now);
  const slowFailure = () => gate.failed(now - 1_000);
  return { gate, slowFailure, set: (at: number) => (now = at), advance: (ms: number) => (now += ms) };
}

describe('SlowStoreGate', () => {
  it('a clock stepping back after a slow failure keeps the store skipped no longer than the retry pause', () => {
    const { gate, slowFailure, advance } = gateAt(1_000_000);
    slowFailure();
    expect(gate.admits()).toBe(false);
    advance(-3_600_000);
    expect(gate.admits()).toBe(true);
  });

  it('once the pause is over, one call tries the store while the others keep skipping it until it answers', () => {
    const { gate, slowFailure, advance } = gateAt(1_000_000);
    slowFailure();
    advance(RETRY_MS);
    expect([gate.admits(), gate.admits(), gate.admits()]).toEqual([true, false, false]);
    gate.succeeded();
    expect([gate.admits(), gate.admits()]).toEqual([true, true]);
  });

  it('a fast failure (a refused connection) never shuts the gate, and a probe failing fast opens it', () => {
    const { gate, slowFailure, set, advance } = gateAt(1_000_000);
    gate.failed(1_000_000);
    set(1_000_050);
    gate.failed(1_000_000);
    expect(gate.admits()).toBe(true);

    slowFailure();
    advance(RETRY_MS);
    expect(gate.admits()).toBe(true);
    gate.failed(1_000_050 + RETRY_MS);
    expect([gate.admits(), gate.admits()]).toEqual([true, true]);
  });
});
