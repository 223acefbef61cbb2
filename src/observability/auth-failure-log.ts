// Failed authentications logged as one line per client address per interval with counts, not one line per request:
// a flood of bad credentials (or of requests from outside INBOUND_ALLOW_CIDRS) must not turn into a flood of log lines.

export interface AuthFailureLog {
  /** A request from `clientIp` whose credential was missing or wrong (answered 401). */
  failed(clientIp: string, requestId: string): void;
  /** A request from a blocked `clientIp` answered 429. */
  refused(clientIp: string, requestId: string): void;
  /** A bearer token that could not be checked (the issuer is unavailable): a 401 not held against the caller. */
  unverified(clientIp: string, requestId: string): void;
  /** A request from `clientIp`, outside INBOUND_ALLOW_CIDRS, answered 403 before anything else. */
  outsideAllowList(clientIp: string, requestId: string): void;
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

type Kind = 'failed' | 'refused' | 'unverified' | 'outsideAllowList';

interface Tally extends Record<Kind, number> {
  /** One request to look up in the caller's own records (its X-Request-Id). */
  lastRequestId: string;
}

const AUTH_FAILURE_LOG_MESSAGE = 'failed authentications';

export function createAuthFailureLog(options: AuthFailureLogOptions): AuthFailureLog {
  const intervalMs = options.intervalMs ?? 60_000;
  const maxAddresses = options.maxAddresses ?? 10_000;
  let tallies = new Map<string, Tally>();
  let untallied = noCounts();
  let intervalStartedAt = Date.now();

  const count = (kind: Kind, clientIp: string, requestId: string): void => {
    let tally = tallies.get(clientIp);
    if (!tally) {
      if (tallies.size >= maxAddresses) {
        untallied[kind] += 1;
        return;
      }
      tally = { ...noCounts(), lastRequestId: requestId };
      tallies.set(clientIp, tally);
    }
    tally[kind] += 1;
    tally.lastRequestId = requestId;
  };

  const flush = () => {
    const intervalSeconds = Math.round((Date.now() - intervalStartedAt) / 1000);
    for (const [clientIp, tally] of tallies)
      options.logger.warn({ clientIp, ...tally, intervalSeconds }, AUTH_FAILURE_LOG_MESSAGE);
    if (Object.values(untallied).some((n) => n > 0))
      options.logger.warn(
        { ...untallied, intervalSeconds, maxAddresses },
        `${AUTH_FAILURE_LOG_MESSAGE} from more addresses than one interval tallies`,
      );
    tallies = new Map();
    untallied = noCounts();
    intervalStartedAt = Date.now();
  };
  const timer = setInterval(flush, intervalMs);
  timer.unref();

  return {
    failed: (clientIp, requestId) => count('failed', clientIp, requestId),
    refused: (clientIp, requestId) => count('refused', clientIp, requestId),
    unverified: (clientIp, requestId) => count('unverified', clientIp, requestId),
    outsideAllowList: (clientIp, requestId) => count('outsideAllowList', clientIp, requestId),
    flush,
    close() {
      clearInterval(timer);
      flush();
    },
  };
}

function noCounts(): Record<Kind, number> {
  return { failed: 0, refused: 0, unverified: 0, outsideAllowList: 0 };
}
