// Whether a Redis keeps what the usage ledger and the quota counters write: persistence on (append-only file) and no
// eviction. Read with CONFIG GET; judged by one pure function that the doctor, /readyz and the deploy tests share.
import type { RedisClient } from './redis-connection';

/** The server settings that decide it, as CONFIG GET answers them. */
export interface DurabilitySettings {
  readonly appendonly: string;
  readonly appendfsync: string;
  /** RDB snapshot rules ("" when off). */
  readonly save: string;
  readonly maxmemoryPolicy: string;
  /** Bytes; 0 is no limit (nothing is ever evicted, whatever the policy). */
  readonly maxmemory: number;
}

export type Durability =
  | { readonly state: 'durable'; readonly detail: string }
  /** The ledger survives most restarts, but not as the shipped configuration intends (RDB only, a dormant policy). */
  | { readonly state: 'weak'; readonly detail: string; readonly fix: string }
  | { readonly state: 'not-durable'; readonly detail: string; readonly fix: string }
  /** CONFIG GET refused (managed services rename or forbid it): nothing is known, nothing is claimed. */
  | { readonly state: 'unknown'; readonly detail: string; readonly fix: string };

/** Keeps no key from an eviction: every ledger day and quota counter has an expiry, so volatile-* may drop them too. */
const KEEPS_EVERY_KEY = 'noeviction';

export const DURABILITY_FIX =
  'run that Redis with appendonly yes, appendfsync everysec, maxmemory-policy noeviction and a volume (docker-compose.yml does)';

export function judgeDurability(settings: DurabilitySettings): Durability {
  const aof = settings.appendonly === 'yes';
  const rdb = settings.save.trim() !== '';
  const evicting = settings.maxmemoryPolicy !== KEEPS_EVERY_KEY;
  const problems: string[] = [];
  if (!aof && !rdb) problems.push('persistence is off (appendonly no, no save rules): a restart empties it');
  if (evicting && settings.maxmemory > 0)
    problems.push(
      `maxmemory-policy ${settings.maxmemoryPolicy} evicts keys at maxmemory, ledger days and quota counters among them`,
    );
  if (problems.length > 0) return { state: 'not-durable', detail: problems.join('; '), fix: DURABILITY_FIX };
  const weak: string[] = [];
  if (!aof) weak.push('snapshots only (appendonly no): a restart loses the writes since the last save');
  else if (settings.appendfsync === 'no')
    weak.push('appendfsync no: a crash of the host loses what the kernel had not written (up to ~30 s)');
  if (evicting)
    weak.push(`maxmemory-policy ${settings.maxmemoryPolicy} would evict keys as soon as a maxmemory is set`);
  if (weak.length > 0) return { state: 'weak', detail: weak.join('; '), fix: DURABILITY_FIX };
  return {
    state: 'durable',
    detail: `append-only file (appendfsync ${settings.appendfsync}), maxmemory-policy ${settings.maxmemoryPolicy}`,
  };
}

/** The deciding settings, as CONFIG GET patterns. */
const ASKED = ['appendonly', 'appendfsync', 'save', 'maxmemory*'] as const;

const REFUSED = {
  state: 'unknown',
  detail: 'Redis refused CONFIG GET (a managed service?): persistence and eviction cannot be read',
  fix: "check in the service's settings that it persists (append-only, fsync every second) and evicts nothing (noeviction)",
} as const satisfies Durability;

/**
 * CONFIG GET of the deciding settings (one command; one per setting on a Redis before 7.0, which takes one parameter
 * per CONFIG GET). A Cluster is asked through one node (ioredis picks it): the settings of a cluster's nodes are the
 * same by construction of a deployment, and one node is what can be known. An answer without the settings (a proxy,
 * a Redis-like store) is unknown: nothing is claimed from an absence.
 */
export async function readDurability(redis: RedisClient): Promise<Durability> {
  let values: Map<string, string>;
  try {
    values = await configGet(redis);
  } catch (error) {
    const message = (error as Error)?.message ?? '';
    if (/unknown command|NOPERM|no permissions|ERR unknown|disabled/i.test(message)) return REFUSED;
    throw error;
  }
  if (!values.has('appendonly') || !values.has('save'))
    return {
      state: 'unknown',
      detail:
        'Redis answered CONFIG GET without appendonly and save (a proxy, or not Redis itself?): persistence and eviction cannot be read',
      fix: REFUSED.fix,
    };
  return judgeDurability({
    appendonly: values.get('appendonly') ?? 'no',
    appendfsync: values.get('appendfsync') ?? 'everysec',
    save: values.get('save') ?? '',
    maxmemoryPolicy: values.get('maxmemory-policy') ?? KEEPS_EVERY_KEY,
    maxmemory: Number(values.get('maxmemory') ?? 0),
  });
}

async function configGet(redis: RedisClient): Promise<Map<string, string>> {
  const values = new Map<string, string>();
  const add = (answer: unknown) => {
    const list = Array.isArray(answer) ? answer.map(String) : [];
    for (let i = 0; i + 1 < list.length; i += 2) values.set(list[i] as string, list[i + 1] as string);
  };
  try {
    add(await redis.call('CONFIG', 'GET', ...ASKED));
  } catch (error) {
    if (!/wrong number of arguments/i.test((error as Error)?.message ?? '')) throw error;
    for (const pattern of ASKED) add(await redis.call('CONFIG', 'GET', pattern));
  }
  return values;
}

/**
 * The settings a deploy file gives a redis-server (`name value` pairs from a command line or redis.conf lines), over
 * Redis' defaults. Quotes around a value are removed.
 */
export function durabilityOfServerSettings(entries: Iterable<readonly [string, string]>): DurabilitySettings {
  const values = new Map<string, string>([
    ['appendonly', 'no'],
    ['appendfsync', 'everysec'],
    ['save', '3600 1 300 100 60 10000'],
    ['maxmemory-policy', KEEPS_EVERY_KEY],
    ['maxmemory', '0'],
  ]);
  for (const [name, value] of entries) {
    const key = name.replace(/^--/, '').toLowerCase();
    if (values.has(key)) values.set(key, value.trim().replace(/^"(.*)"$/, '$1'));
  }
  const get = (key: string) => values.get(key) ?? '';
  return {
    appendonly: get('appendonly'),
    appendfsync: get('appendfsync'),
    save: get('save'),
    maxmemoryPolicy: get('maxmemory-policy'),
    maxmemory: Number.parseInt(get('maxmemory'), 10) || 0,
  };
}

/** The last durability read of a store, refreshed in the background (for /readyz, which never waits on Redis). */
export interface DurabilityWatch {
  /** Undefined until the first read answered (or while Redis is unreachable at start). */
  latest(): Durability | undefined;
  stop(): void;
}

/** Reads at start and then every `everyMs` (one CONFIG GET: nothing next to the ledger's once-a-second write). */
export function watchDurability(redis: RedisClient, everyMs = 300_000): DurabilityWatch {
  let latest: Durability | undefined;
  const read = () => {
    readDurability(redis).then(
      (durability) => {
        latest = durability;
      },
      () => undefined,
    );
  };
  if (redis.status === 'ready') read();
  else redis.once('ready', read);
  const timer = setInterval(read, everyMs);
  timer.unref();
  return {
    latest: () => latest,
    stop: () => {
      clearInterval(timer);
      redis.off('ready', read);
    },
  };
}
