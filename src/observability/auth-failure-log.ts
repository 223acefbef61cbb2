// Failed authentications logged as one line per client address per interval with counts, not one line per request:
// a flood of bad credentials must not turn into a flood of log lines.

export interface AuthFailureLog {
  /** A request from `clientIp` whose credential was missing or wrong (answered 401). */
  failed(clientIp: string, requestId: string): void;
  /** A request from a blocked `clientIp` answered 429 without verifying anything. */
  refused(clientIp: string, requestId: string): void;
  /** Writes the lines of the interval so far and starts a new one. */
  flush(): void;
  /** Stops the timer and writes what is left (shutdown). */
  close(): void;
}

export interface AuthFailureLogOptions {
  readonly logger: { warn(fields: Record<string, unknown>, message: string): void };
  /** Default 60 s. */
  readonly intervalMs?: number;
  /** Addresses tallied per interval; the rest are summed into one line, so memory stays bounded. Default 10 000. */
  readonly maxAddresses?: number;
}

interface Tally {
  failed: number;
  refused: number;
  /** One request to look up in the caller's own records (its X-Request-Id). */
  lastRequestId: string;
}

export const AUTH_FAILURE_LOG_MESSAGE = 'failed authentications';

export function createAuthFailureLog(options: AuthFailureLogOptions): AuthFailureLog {
  const intervalMs = options.intervalMs ?? 60_000;
  const maxAddresses = options.maxAddresses ?? 10_000;
  let tallies = new Map<string, Tally>();
  let untallied = { failed: 0, refused: 0 };
  let intervalStartedAt = Date.now();

  const tallyOf = (clientIp: string, requestId: string): Tally | undefined => {
    let tally = tallies.get(clientIp);
    if (!tally) {
      if (tallies.size >= maxAddresses) return undefined;
      tally = { failed: 0, refused: 0, lastRequestId: requestId };
      tallies.set(clientIp, tally);
    }
    tally.lastRequestId = requestId;
    return tally;
  };

  const flush = () => {
    const intervalSeconds = Math.round((Date.now() - intervalStartedAt) / 1000);
    for (const [clientIp, tally] of tallies)
      options.logger.warn({ clientIp, ...tally, intervalSeconds }, AUTH_FAILURE_LOG_MESSAGE);
    if (untallied.failed + untallied.refused > 0)
      options.logger.warn(
        { ...untallied, intervalSeconds, maxAddresses },
        `${AUTH_FAILURE_LOG_MESSAGE} from more addresses than one interval tallies`,
      );
    tallies = new Map();
    untallied = { failed: 0, refused: 0 };
    intervalStartedAt = Date.now();
  };
  const timer = setInterval(flush, intervalMs);
  timer.unref();

  return {
    failed(clientIp, requestId) {
      const tally = tallyOf(clientIp, requestId);
      if (tally) tally.failed += 1;
      else untallied.failed += 1;
    },
    refused(clientIp, requestId) {
      const tally = tallyOf(clientIp, requestId);
      if (tally) tally.refused += 1;
      else untallied.refused += 1;
    },
    flush,
    close() {
      clearInterval(timer);
      flush();
    },
  };
}
