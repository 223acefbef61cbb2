// Redis' own count of commands served (INFO commandstats), to charge a gateway its Redis commands per request.
import Redis from 'ioredis';

export interface RedisCommandCounter {
  /** Commands served so far by name (lower case), without the INFO calls of this counter itself. */
  calls(): Promise<Record<string, number>>;
  close(): Promise<void>;
}

export function redisCommandCounter(url: string): RedisCommandCounter {
  const client = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 });
  return {
    async calls() {
      const calls: Record<string, number> = {};
      for (const [, name, count] of (await client.info('commandstats')).matchAll(
        /^cmdstat_([^:]+):calls=(\d+)/gm,
      ))
        if (name && name !== 'info') calls[name] = Number(count);
      return calls;
    },
    async close() {
      await client.quit().catch(() => client.disconnect());
    },
  };
}

/** Commands per 1,000 requests between two readings: the total and each command's share. */
export function commandsPer1k(
  before: Record<string, number>,
  after: Record<string, number>,
  requests: number,
): { total: number; byCommand: Record<string, number> } {
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const [name, count] of Object.entries(after)) {
    const delta = count - (before[name] ?? 0);
    if (delta <= 0) continue;
    byCommand[name] = Math.round((100_000 * delta) / requests) / 100;
    total += delta;
  }
  return { total: (1000 * total) / requests, byCommand };
}
