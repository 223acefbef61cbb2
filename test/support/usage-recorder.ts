// A stand-in replica for the SIGKILL test: records usage at a steady rate into the real ledger (Redis, one flush a
// second) and prints its running count after every batch, so the test knows what it had recorded when killed.
import { createRedisClient, type RedisClient } from '../../src/store/redis-connection';
import { createUsage } from '../../src/usage';

const url = process.env.REDIS_URL ?? '';
const prefix = process.env.PREFIX ?? 'kill:';
const perTick = Number(process.env.PER_TICK ?? '20');

const redis = createRedisClient({
  topology: { kind: 'standalone', url },
  tls: false,
  keyPrefix: prefix,
  allowMemoryStore: false,
}) as RedisClient;
redis.on('error', () => undefined);
const quiet = { info: () => undefined, warn: () => undefined };
const usage = createUsage({
  redis,
  keyPrefix: prefix,
  settings: { retentionDays: 400 },
  limitsOf: () => undefined,
  logger: quiet,
});
let recorded = 0;
redis.once('ready', () => {
  process.stdout.write('ready\n');
  setInterval(() => {
    for (let i = 0; i < perTick; i++) usage.ledger.record('kill-test', 'default', 'getPlan', 'billable');
    recorded += perTick;
    process.stdout.write(`${recorded}\n`);
  }, 10);
});
