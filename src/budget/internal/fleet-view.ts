// The fleet's budget record read from outside the fleet (the doctor): its live replicas, their holds, the learned
// rate and the pause, in the format the exchange script writes (redis-budget-store.ts). Reads only; never writes.
import type { RedisClient } from '../../store/redis-connection';
import { RECORD_TTL_MS } from './fleet-state';

/** One account's fleet as its Redis record says now. Rates in calls per second; times in ms from now. */
export interface FleetView {
  /** The record exists (some replica exchanged within its TTL). */
  readonly found: boolean;
  /** The learned rate (AIMD after a 429 without Retry-After); absent: none, the configured rate applies. */
  readonly learnedRate?: number;
  /** Ms until the fleet's pause ends; absent when not paused. */
  readonly pausedForMs?: number;
  /** Ms the fleet's one probe stays claimed; absent when none is out. */
  readonly probeForMs?: number;
  /** Replicas whose lease is live, each with what the fleet keeps for it (its hold) and when its lease ends. */
  readonly replicas: readonly { readonly hold: number; readonly leaseForMs: number }[];
}

const finite = (text: string | undefined): number | undefined => {
  const n = text === undefined || text === '' ? Number.NaN : Number(text);
  return Number.isFinite(n) ? n : undefined;
};

/**
 * The record's fields read at `now` (Redis's clock, the one the record keeps). Pure: tested without Redis. A pause
 * is held to `maxPauseMs` (UPSTREAM_RETRY_AFTER_MAX_SECONDS) from now, as the exchange script holds it.
 */
export function readFleetView(
  fields: Readonly<Record<string, string>>,
  now: number,
  maxPauseMs = Number.POSITIVE_INFINITY,
): FleetView {
  const learned = finite(fields['@learned']);
  const pause = Math.min(finite(fields['@pause']) ?? 0, now + maxPauseMs);
  const probe = finite(fields['@probeUntil']) ?? 0;
  const replicas: { hold: number; leaseForMs: number }[] = [];
  for (const [field, value] of Object.entries(fields)) {
    if (!field.startsWith('r:')) continue;
    const parts = value.split(' ').map((part) => finite(part));
    const expiresAt = parts[0];
    if (expiresAt === undefined || expiresAt <= now || expiresAt > now + RECORD_TTL_MS) continue;
    // A record of 8 fields (written before holds existed) holds its allocation.
    const holds = parts.length >= 11 ? parts.slice(8, 11) : parts.slice(4, 7);
    const hold = holds.reduce<number>((sum, rate) => sum + Math.max(0, rate ?? 0), 0);
    replicas.push({ hold, leaseForMs: expiresAt - now });
  }
  return {
    found: Object.keys(fields).length > 0,
    ...(learned !== undefined && learned > 0 ? { learnedRate: learned } : {}),
    ...(pause > now ? { pausedForMs: pause - now } : {}),
    ...(probe > now ? { probeForMs: probe - now } : {}),
    replicas,
  };
}

/** Reads the account's fleet record (`budgetKeys(...).fleet`) and Redis's clock: two commands, nothing written. */
export async function fetchFleetView(
  redis: RedisClient,
  key: string,
  maxPauseMs?: number,
): Promise<FleetView> {
  const [fields, time] = await Promise.all([redis.hgetall(key), redis.time()]);
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  return readFleetView(fields, now, maxPauseMs);
}
