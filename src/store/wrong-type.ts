// A key holding another type than the string the gateway writes there: a record that is not ours, not a Redis failure.
import type { RedisClient } from './redis-connection';

/**
 * What a read of such a key answers: a value no record opens (neither sealed nor JSON), so each feature ignores and
 * counts it as it does a forged string (store_records_rejected_total), and its next write replaces the key.
 */
export const FOREIGN_VALUE = 'WRONGTYPE';

/** Redis refused a command for the type of the key it found (a hash, list, set, stream…): Redis itself answers. */
export function isWrongType(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('WRONGTYPE');
}

/** GET `key`: undefined when absent, FOREIGN_VALUE when it holds another type; throws only when Redis fails. */
export async function readString(client: RedisClient, key: string): Promise<string | undefined> {
  try {
    return (await client.get(key)) ?? undefined;
  } catch (error) {
    if (isWrongType(error)) return FOREIGN_VALUE;
    throw error;
  }
}

/**
 * Lua: `held` is what a read of KEYS[1] answers (false when absent, FOREIGN_VALUE when it holds another type), so
 * the compare-and-* scripts compare with what was read instead of failing on a key of another type.
 */
export const LUA_READ_HELD = `local held = redis.call('type', KEYS[1]).ok
if held == 'string' then held = redis.call('get', KEYS[1]) elseif held == 'none' then held = false else held = '${FOREIGN_VALUE}' end`;
