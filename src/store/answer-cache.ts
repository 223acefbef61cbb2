// A short cache of upstream answers (plan reads), shared through Redis when there is one; off by default.
import type { UpstreamAnswer } from '../upstream/forwarder';
import { createExpiringMap } from './expiring-map';
import type { RedisClient } from './redis-connection';

export interface AnswerCache {
  get(key: string): Promise<UpstreamAnswer | undefined>;
  set(key: string, answer: UpstreamAnswer, ttlSeconds: number): Promise<void>;
}

interface StoredAnswer {
  s: number;
  h: Record<string, string>;
  b: string;
}

const encode = (answer: UpstreamAnswer): string =>
  JSON.stringify({
    s: answer.status,
    h: answer.headers,
    b: answer.body.toString('base64'),
  } satisfies StoredAnswer);
const decode = (raw: string): UpstreamAnswer => {
  const stored = JSON.parse(raw) as StoredAnswer;
  return { status: stored.s, headers: stored.h, body: Buffer.from(stored.b, 'base64') };
};

/** Redis errors are misses: a cache must never turn a Redis outage into a caller error. */
export function createRedisAnswerCache(redis: RedisClient, prefix: string): AnswerCache {
  return {
    async get(key) {
      try {
        const raw = await redis.get(prefix + key);
        return raw ? decode(raw) : undefined;
      } catch {
        return undefined;
      }
    },
    async set(key, answer, ttlSeconds) {
      try {
        await redis.set(prefix + key, encode(answer), 'EX', ttlSeconds);
      } catch {
        // a missed write only costs a later upstream call
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
