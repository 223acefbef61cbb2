// Leaves a hung store alone for a moment: after a slow failure its calls are skipped instead of each waiting on it.

/** A failure slower than this (a hung Redis: the command timed out) is slow; a refused connection fails at once. */
const SLOW_STORE_FAILURE_MS = 100;

/**
 * One per user of the store (the shared token cache, the plan cache). A refused or not-yet-connected Redis fails in
 * no time and costs nothing, so only a slow failure shuts the gate, for `retryMs`; then one call tries again (the
 * probe) while the others keep skipping the store until it answers.
 */
export class SlowStoreGate {
  /** Calls skip the store until then (this gate's clock); undefined while the store answers. */
  private shutUntil: number | undefined;

  constructor(
    private readonly retryMs: number,
    private readonly now: () => number,
  ) {}

  /**
   * Whether a call may go to the store now. Past the moment after a slow failure, the call that asks first is let
   * through as the probe and the gate shuts again behind it: a busy replica never sends every call of that instant
   * to a store that may still hang. A clock that stepped back never keeps the gate shut longer than `retryMs`.
   */
  admits(): boolean {
    if (this.shutUntil === undefined) return true;
    const now = this.now();
    if (now < this.shutUntil && this.shutUntil - now <= this.retryMs) return false;
    this.shutUntil = now + this.retryMs;
    return true;
  }

  /** A store call answered: the gate is open. */
  succeeded(): void {
    this.shutUntil = undefined;
  }

  /** A store call that started at `startedAt` (this gate's clock) failed: slowly (shuts the gate) or at once (opens it). */
  failed(startedAt: number): void {
    const now = this.now();
    this.shutUntil = now - startedAt >= SLOW_STORE_FAILURE_MS ? now + this.retryMs : undefined;
  }
}
