// A short cache of upstream answers (plan reads), shared through Redis when there is one; off by default.

import { createExpiringMap } from '../../store/expiring-map';
import type { RedisClient } from '../../store/redis-connection';
import { readString } from '../../store/wrong-type';
import { type RecordSeal, SlowStoreGate } from '../../tokens';
import type { UpstreamAnswer } from './forwarder';

export interface AnswerCache {
  get(key: string): Promise<UpstreamAnswer | undefined>;
  set(key: string, answer: UpstreamAnswer, ttlSeconds: number): Promise<void>;
  /**
   * A cache whose namespace can change (an account's follows the merchant it logs in as): the store as it is now,
   * for one read to look up and keep its answer in the same one, whatever changes while the call is out.
   */
  pin?(): AnswerCache;
}

interface StoredAnswer {
  s: number;
  h: Record<string, string>;
  b: string;
  /** Epoch ms when the entry ends, sealed with it: Redis's own expiry can be lifted (PERSIST) or a copy replayed. */
  e: number;
}

const encode = (answer: UpstreamAnswer, expiresAt: number): string =>
  JSON.stringify({
    s: answer.status,
    h: answer.headers,
    b: answer.body.toString('base64'),
    e: expiresAt,
  } satisfies StoredAnswer);
/**
 * How far past its sealed end an entry Redis still holds is taken for this fleet's own: replicas' clocks a little
 * apart, the write's own round trip (Redis's expiry starts after `e` was set). Such an entry is a plain miss; one
 * further past it was kept longer than it was written for (its expiry lifted, a copy written back): a miss, counted.
 */
const CLOCK_TOLERANCE_MS = 1_000;
/** What decode returns for an entry just past its end: a miss that open() does not count as a rejected record. */
const ENDED: UpstreamAnswer = { status: 0, headers: {}, body: Buffer.alloc(0) };

const isStoredAnswer = (stored: Partial<StoredAnswer> | null): stored is StoredAnswer => {
  const headers = stored?.h;
  return (
    !!stored &&
    typeof stored.e === 'number' &&
    Number.isInteger(stored.s) &&
    (stored.s as number) >= 100 &&
    (stored.s as number) <= 599 &&
    typeof stored.b === 'string' &&
    typeof headers === 'object' &&
    headers !== null &&
    !Array.isArray(headers) &&
    Object.values(headers).every((v) => typeof v === 'string')
  );
};

/**
 * The answer from its JSON text, or undefined unless every field has its shape (it came from Redis) and its own end
 * (`e`) is still ahead: an entry kept past its TTL by whoever can write Redis is as good as absent (ENDED when it is
 * just past, within the clock tolerance).
 */
const decode = (text: string, now: number): UpstreamAnswer | undefined => {
  try {
    const stored = JSON.parse(text) as Partial<StoredAnswer> | null;
    if (!isStoredAnswer(stored)) return undefined;
    if (!(stored.e > now)) return now - stored.e < CLOCK_TOLERANCE_MS ? ENDED : undefined;
    return { status: stored.s, headers: stored.h, body: Buffer.from(stored.b, 'base64') };
  } catch {
    return undefined;
  }
};

/** After a slow failure (a hung Redis) the cache is left alone this long: plan reads never each wait on it. */
const RETRY_HUNG_REDIS_MS = 2_000;

/**
 * Redis errors are misses: a cache must never turn a Redis outage into a caller error, nor a hung Redis into a
 * second of waiting on every plan read. Entries are sealed (`seal`: AES-256-GCM with the Redis key name as
 * associated data when TOKEN_ENCRYPTION_KEY is set); one that does not open is a miss, counted, and never served.
 */
export function createRedisAnswerCache(
  redis: RedisClient,
  prefix: string,
  seal: RecordSeal,
  now: () => number = Date.now,
): AnswerCache {
  const gate = new SlowStoreGate(RETRY_HUNG_REDIS_MS, now);
  // Made once, not per read.
  const decodeNow = (text: string) => decode(text, now());
  return {
    async get(key) {
      if (!gate.admits()) return undefined;
      const started = now();
      let raw: string | undefined;
      try {
        // A key of another type reads as a value no seal opens: a miss, counted, not Redis failing.
        raw = await readString(redis, prefix + key);
      } catch {
        gate.failed(started);
        return undefined;
      }
      gate.succeeded();
      const answer = raw ? seal.open('plan_cache', raw, prefix + key, decodeNow) : undefined;
      return answer === ENDED ? undefined : answer;
    },
    async set(key, answer, ttlSeconds) {
      if (!gate.admits()) return;
      const started = now();
      try {
        const sealed = seal.seal(encode(answer, started + ttlSeconds * 1000), prefix + key);
        await redis.set(prefix + key, sealed, 'EX', ttlSeconds);
        gate.succeeded();
      } catch {
        // a missed write only costs a later upstream call
        gate.failed(started);
      }
    },
  };
}

export function createMemoryAnswerCache(now: () => number = Date.now): AnswerCache {
  const entries = createExpiringMap<UpstreamAnswer>(now);
  return {
    async get(key) {
      return entries.get(key);
    },
    async set(key, answer, ttlSeconds) {
      // Bounded: plan ids are caller-chosen; a flood of distinct ids must not grow memory without limit.
      if (entries.size > 10_000) entries.clear();
      entries.set(key, answer, ttlSeconds * 1000);
    },
  };
}
