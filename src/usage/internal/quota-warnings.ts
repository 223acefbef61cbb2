// Quota thresholds (80 %, 100 %): one log line (and webhook call) per client, account, period and threshold for the
// whole fleet, decided by a SET NX in Redis; while Redis is unreachable each replica warns once on its own.
import type { RedisClient } from '../../store/redis-connection';
import type { QuotaEvent } from './quota-gate';
import type { QuotaWebhook } from './quota-webhook';

type LogFn = (fields: Record<string, unknown>, message: string) => void;

export interface QuotaWarningsOptions {
  /** true for the first replica to claim `key` (it logs); false for the others. */
  readonly claimOnce: (key: string, expireAt: number) => Promise<boolean>;
  readonly warningKey: (event: QuotaEvent, percent: number) => string;
  readonly logger: { warn: LogFn };
  readonly webhook?: QuotaWebhook;
  readonly onWarning?: (event: QuotaEvent, percent: number) => void;
}

/** The fleet-once claim: SET NX until a day after the period ends. */
export function redisClaimOnce(redis: RedisClient) {
  return async (key: string, expireAt: number): Promise<boolean> =>
    (await redis.set(key, '1', 'PXAT', Math.round(expireAt), 'NX')) === 'OK';
}

export function memoryClaimOnce() {
  const claimed = new Set<string>();
  return async (key: string): Promise<boolean> => {
    if (claimed.has(key)) return false;
    claimed.add(key);
    return true;
  };
}

/** The gate's onThreshold: fire and forget (never awaited on a request). */
export function quotaWarnings(options: QuotaWarningsOptions) {
  return (event: QuotaEvent, threshold: number): void => {
    const percent = Math.round(threshold * 100);
    const key = options.warningKey(event, percent);
    options.claimOnce(key, event.periodEndsAt + 86_400_000).then(
      (first) => first && announce(options, event, percent, 'fleet'),
      () => announce(options, event, percent, 'replica'),
    );
  };
}

function announce(
  options: QuotaWarningsOptions,
  event: QuotaEvent,
  percent: number,
  scope: 'fleet' | 'replica',
): void {
  const fields = {
    event: 'quota_threshold',
    client: event.clientId,
    account: event.accountId,
    period: event.period,
    periodId: event.periodId,
    timeZone: event.timeZone,
    threshold: percent,
    limit: event.limit,
    used: event.used,
    resetsAt: new Date(event.periodEndsAt).toISOString(),
  };
  options.onWarning?.(event, percent);
  options.logger.warn(
    { ...fields, ...(scope === 'replica' ? { warnedBy: 'this replica (store unreachable)' } : {}) },
    `quota ${percent} % reached: client ${event.clientId}, account ${event.accountId}, ${event.period} ${event.periodId}`,
  );
  options.webhook?.send(fields);
}
