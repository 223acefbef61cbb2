// The proactive refresh: renews the pair in memory before it runs out, so callers never wait for a token.
import type { Logger } from 'pino';
import type { Clock, ClockTimer } from './clock';
import { resultOf } from './token-endpoint';
import type { TokenPair } from './token-pair';

export interface RefreshSchedulerDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  /** [0, 1) for the jitter. */
  readonly random: () => number;
  /** Refresh when less than this is left (TOKEN_REFRESH_SKEW_SECONDS). */
  readonly skewMs: number;
  /** The pair in memory now. */
  readonly current: () => TokenPair | undefined;
  /** The epoch milliseconds until which the current token is handed out. */
  readonly usableUntil: () => number;
  /** Milliseconds left of a login backoff. */
  readonly backoffLeft: () => number;
  readonly stopped: () => boolean;
  /** Runs the refresh flight. */
  readonly refresh: () => Promise<unknown>;
}

/** setTimeout's longest delay (about 24.8 days): Node fires a longer one after 1 ms, which would refresh in a loop. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class RefreshScheduler {
  private timer?: ClockTimer;

  constructor(private readonly deps: RefreshSchedulerDeps) {}

  /** At exp − skew − jitter (up to 10 % of the skew, so replicas do not all fire at once). */
  schedule(delayMs?: number): void {
    const { clock, random, skewMs } = this.deps;
    this.cancel();
    const pair = this.deps.current();
    if (this.deps.stopped() || !pair) return;
    const due = pair.accessExpiresAt - skewMs - random() * 0.1 * skewMs - clock.now();
    // A longer life (or an `exp` in milliseconds, a provider bug) refreshes after the longest wait a timer holds.
    const timer = clock.setTimeout(
      () => this.onDue(pair),
      Math.min(MAX_TIMER_MS, Math.max(0, delayMs ?? due)),
    );
    timer.unref?.();
    this.timer = timer;
  }

  cancel(): void {
    if (this.timer) this.deps.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private onDue(due: TokenPair): void {
    this.timer = undefined;
    if (this.deps.stopped() || this.deps.current() !== due) return;
    this.deps.refresh().then(
      () => {
        if (this.deps.current() === due) this.retrySoon();
      },
      (error: unknown) => {
        this.deps.logger.warn(
          { event: 'token.refresh.background', result: resultOf(error) },
          'background token refresh failed; the current token keeps serving',
        );
        if (this.deps.current() === due) this.retrySoon();
      },
    );
  }

  /** The current token still serves: try again before it runs out, never in a tight loop. */
  private retrySoon(): void {
    const left = this.deps.usableUntil() - this.deps.clock.now();
    if (left <= 0) return;
    this.schedule(Math.max(this.deps.backoffLeft(), Math.min(5_000, Math.max(200, left / 3))));
  }
}
