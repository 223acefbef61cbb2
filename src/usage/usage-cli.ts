// `npm run usage`: the usage ledger for a range of UTC days, per client, account and operation, with totals; read
// from the gateway's Redis (loadConfig, the same variables). Exit 0 printed, 1 the ledger could not be read, 2 bad
// arguments or configuration.
import { loadConfig } from '../config/load-config';
import { createRedisClient, whenRedisReady } from '../store/redis-connection';
import { readUsage, usageLedgerStore } from '.';
import { formatUsage, parseUsageArgs, USAGE_HELP, UsageArgsError, usageNotes } from './internal/usage-format';

async function main(argv: string[]): Promise<number> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    process.stderr.write(`npm run usage: ${(error as Error).message}\n`);
    return 2;
  }
  let args: ReturnType<typeof parseUsageArgs>;
  try {
    args = parseUsageArgs(argv, new Date().toISOString().slice(0, 10), config.usage.retentionDays);
  } catch (error) {
    if (!(error instanceof UsageArgsError)) throw error;
    process.stderr.write(`${error.message ? `npm run usage: ${error.message}\n\n` : ''}${USAGE_HELP}\n`);
    return error.message ? 2 : 0;
  }
  // USAGE_REDIS_* when the ledger has a Redis of its own, else the token store's.
  const store = config.usage.redis ?? config.redis;
  const redis = createRedisClient(store, { retry: false });
  if (!redis) {
    process.stderr.write(
      'npm run usage: no Redis is configured (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES, or USAGE_REDIS_*): without it each gateway keeps its ledger in its own memory, which only that process can read\n',
    );
    return 2;
  }
  redis.on('error', () => undefined);
  try {
    if (!(await whenRedisReady(redis, 5_000))) {
      process.stderr.write('npm run usage: the ledger could not be read: Redis did not answer within 5 s\n');
      return 1;
    }
    const report = await readUsage(usageLedgerStore(redis, store.keyPrefix), args);
    process.stdout.write(formatUsage(report, args.format));
    // What the figures cannot say: under the table; on stderr beside a csv; a json holds `missing` and `gaps`.
    const notes = args.format === 'json' ? [] : usageNotes(report);
    const out = args.format === 'table' ? process.stdout : process.stderr;
    if (notes.length > 0 && args.format === 'table') out.write('\n');
    for (const note of notes) out.write(`${args.format === 'table' ? 'note: ' : 'npm run usage: '}${note}\n`);
    if (report.skipped > 0)
      process.stderr.write(
        `npm run usage: ${report.skipped} stored ledger entries were not a replica's counts (malformed) and were skipped\n`,
      );
    return 0;
  } finally {
    redis.disconnect();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `npm run usage: the ledger could not be read (${(error as Error)?.name ?? 'error'})\n`,
    );
    process.exitCode = 1;
  },
);
