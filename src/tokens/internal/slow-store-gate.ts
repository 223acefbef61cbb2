// Leaves a hung store alone for a moment: after a slow failure its calls are skipped instead of each waiting on it.

/** A failure slower than this (a hung Redis: the command timed out) is slow; a refused connection fails at once. */
const SLOW_STORE_FAILURE_MS = 100;

/**
 * One per user of the store (the shared token cache, the plan cache). A refused or not-yet-connected Redis fails in
 * no time and costs nothing, so only a slow failure closes the gate, for `retryMs`; then one call tries again.
 */
export class SlowStoreGate {
  private skipUntil = 0;

  constructor(
    private readonly retryMs: number,
    private readonly now: () => number,
  ) {}

  /** Whether calls skip the store right now. */
  get closed(): boolean {
    return this.now() < this.skipUntil;
  }

  /** A store call that started at `startedAt` (this gate's clock) failed. */
  failed(startedAt: number): void {
    const now = this.now();
    if (now - startedAt >= SLOW_STORE_FAILURE_MS) this.skipUntil = now + this.retryMs;
  }
}
