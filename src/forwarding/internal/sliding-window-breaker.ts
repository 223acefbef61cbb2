// When an operation's circuit opens: a failure ratio over a sliding window that holds at least a minimum of calls.
import { CircuitState, type IBreaker } from 'cockatiel';

export interface SlidingWindowSettings {
  /** Opens above this share of failed calls… */
  readonly failureRatio: number;
  /** …among the calls of the last `windowMs`… */
  readonly windowMs: number;
  /** …when there are at least this many of them. */
  readonly minimumCalls: number;
}

interface Slice {
  failures: number;
  successes: number;
}

/**
 * cockatiel's breaker interface (its policy keeps doing the rest: open, half-open, the probe). The window is split
 * into slices of equal length (at least 5, at most a second each); a call counts in the slice of its time, and every
 * slice whose time has passed is emptied before the next call counts, however long the traffic was quiet.
 * cockatiel's own SamplingBreaker moves one slice per call instead, so after a quiet spell calls from long ago still
 * counted: a blip an hour earlier plus a handful of poison calls opened the circuit for everyone.
 */
export class SlidingWindowBreaker implements IBreaker {
  private readonly slices: Slice[];
  private readonly sliceMs: number;
  /** The number (time / sliceMs) of the slice the last call counted in. */
  private slice = Number.NEGATIVE_INFINITY;
  private failures = 0;
  private successes = 0;

  constructor(
    private readonly settings: SlidingWindowSettings,
    /**
     * Steady time (ms), never the wall clock: a wall clock stepped back (NTP) would count every call in one slice
     * until it caught up, so for that long nothing would leave the window.
     */
    private readonly now: () => number = () => performance.now(),
  ) {
    const count = Math.max(5, Math.ceil(settings.windowMs / 1000));
    this.slices = Array.from({ length: count }, () => ({ failures: 0, successes: 0 }));
    this.sliceMs = settings.windowMs / count;
  }

  get state(): unknown {
    return { slices: this.slices.map((slice) => ({ ...slice })), slice: this.slice };
  }

  set state(value: unknown) {
    const { slices, slice } = value as { slices: Slice[]; slice: number };
    for (const [i, own] of this.slices.entries()) Object.assign(own, slices[i]);
    this.slice = slice;
    this.failures = this.slices.reduce((sum, s) => sum + s.failures, 0);
    this.successes = this.slices.reduce((sum, s) => sum + s.successes, 0);
  }

  success(state: CircuitState): void {
    // The probe of a half-open circuit succeeded: the circuit closes with an empty window.
    if (state === CircuitState.HalfOpen) this.empty(this.slices.length);
    this.count(true);
  }

  failure(state: CircuitState): boolean {
    this.count(false);
    if (state !== CircuitState.Closed) return true;
    const calls = this.failures + this.successes;
    return calls >= this.settings.minimumCalls && this.failures > this.settings.failureRatio * calls;
  }

  private count(success: boolean): void {
    const slice = Math.floor(this.now() / this.sliceMs);
    // A clock handed in may step back: a call never counts in a slice older than the last one.
    if (slice > this.slice) {
      this.empty(Math.min(this.slices.length, slice - this.slice));
      this.slice = slice;
    }
    const current = this.slices[this.indexOf(this.slice)] as Slice;
    if (success) {
      current.successes += 1;
      this.successes += 1;
    } else {
      current.failures += 1;
      this.failures += 1;
    }
  }

  /** Empties the `steps` slices after the current one (the ones time has moved into). */
  private empty(steps: number): void {
    for (let step = 1; step <= steps; step++) {
      const slice = this.slices[this.indexOf(this.slice + step)] as Slice;
      this.failures -= slice.failures;
      this.successes -= slice.successes;
      slice.failures = 0;
      slice.successes = 0;
    }
  }

  private indexOf(slice: number): number {
    const length = this.slices.length;
    return Number.isFinite(slice) ? ((slice % length) + length) % length : 0;
  }
}
