// Several token managers in one process, each with its own ioredis client: a fleet of replicas, minus HTTP.
import { Writable } from 'node:stream';
import pino from 'pino';
import { createMetrics, type Metrics } from '../../../src/observability/metrics';
import type { SimulatorOptions } from '../../../src/simulator/options';
import { SEED_PLAN_ID } from '../../../src/simulator/plans';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { createRedisClient, type RedisClient } from '../../../src/store/redis-connection';
import { createRedisTokenStore } from '../../../src/store/redis-token-store';
import { type CredentialSource, staticCredentialSource } from '../../../src/tokens/internal/credentials';
import { createRecordSeal } from '../../../src/tokens/internal/record-seal';
import { createTokenCipher } from '../../../src/tokens/internal/token-cipher';
import { createTokenClient } from '../../../src/tokens/internal/token-client';
import { createTokenManager, type TokenManagerSettings } from '../../../src/tokens/internal/token-manager';
import type { TokenProvider } from '../../../src/tokens/internal/token-provider';
import type { TokenStore } from '../../../src/tokens/internal/token-store';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

export const USERNAME = 'fleet-merchant';
export const PASSWORD = 'fleet-password-123';

export interface Replica {
  readonly manager: TokenProvider;
  readonly redis: RedisClient;
  readonly store: TokenStore;
  readonly metrics: Metrics;
}

export interface FleetOptions {
  readonly replicas?: number;
  readonly simulator?: Partial<SimulatorOptions>;
  readonly settings?: Partial<TokenManagerSettings>;
  /** TOKEN_ENCRYPTION_KEY: the shared records are sealed with it. */
  readonly encryptionKey?: Buffer;
  /** Credentials the gateway uses (the simulator accepts USERNAME / PASSWORD). */
  readonly credentials?: () => CredentialSource;
}

export interface Fleet {
  readonly redisServer: RedisServer;
  readonly simulator: RunningSimulator;
  readonly replicas: Replica[];
  readonly settings: TokenManagerSettings;
  logs(): string;
  /** A forwarded call as the proxy makes it: one retry after a 401, through renewAfterRejection. */
  callPlan(replica: Replica): Promise<number>;
  stop(): Promise<void>;
}

export async function startFleet(options: FleetOptions = {}): Promise<Fleet> {
  const redisServer = await startRedisServer();
  const simulator = await startSimulator({
    port: 0,
    username: USERNAME,
    password: PASSWORD,
    ...options.simulator,
  });
  let text = '';
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk, _encoding, callback) {
        text += chunk.toString();
        callback();
      },
    }),
  );
  const settings: TokenManagerSettings = {
    upstreamBaseUrl: simulator.url,
    refreshSkewSeconds: 60,
    lockTtlMs: 5_000,
    lockWaitMs: 3_000,
    loginMinIntervalMs: 20_000,
    keyPrefix: 'it:',
    ...options.settings,
  };
  const client = createTokenClient({ baseUrl: simulator.url, timeoutMs: 3_000 });
  const replicas: Replica[] = [];
  for (let i = 0; i < (options.replicas ?? 3); i++) {
    const redis = createRedisClient({
      topology: { kind: 'standalone', url: redisServer.url },
      tls: false,
      keyPrefix: settings.keyPrefix,
      allowMemoryStore: false,
    }) as RedisClient;
    redis.on('error', () => undefined);
    const store = createRedisTokenStore({ client: redis, logger });
    const metrics = createMetrics();
    const manager = createTokenManager({
      store,
      client,
      credentials: options.credentials?.() ?? staticCredentialSource(USERNAME, PASSWORD),
      logger,
      metrics,
      seal: createRecordSeal(createTokenCipher(options.encryptionKey), metrics.storeRecordsRejected),
      settings,
    });
    replicas.push({ manager, redis, store, metrics });
  }
  await Promise.all(replicas.map((r) => waitReady(r.redis)));
  await Promise.all(replicas.map((r) => r.manager.start()));
  // Let the subscriber connections subscribe before the test publishes anything.
  await new Promise((resolve) => setTimeout(resolve, 100));

  return {
    redisServer,
    simulator,
    replicas,
    settings,
    logs: () => text,
    async callPlan(replica) {
      const call = (token: string) =>
        fetch(`${simulator.url}/api/subscriptions/plan/${SEED_PLAN_ID}`, {
          headers: { authorization: `Bearer ${token}` },
        });
      const token = await replica.manager.getAccessToken();
      const first = await call(token.value);
      await first.arrayBuffer();
      if (first.status !== 401) return first.status;
      const renewed = await replica.manager.renewAfterRejection(token.value);
      const second = await call(renewed.value);
      await second.arrayBuffer();
      return second.status;
    },
    async stop() {
      for (const r of replicas) {
        await r.manager.stop();
        await r.store.close();
        r.redis.disconnect();
      }
      await simulator.close();
      await redisServer.stop();
    },
  };
}

export function waitReady(redis: RedisClient, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('redis client not ready')), timeoutMs);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Calls every replica every `intervalMs` until `durationMs` is over; resolves with every status seen. */
export async function steadyLoad(fleet: Fleet, durationMs: number, intervalMs = 50): Promise<number[]> {
  const statuses: number[] = [];
  const end = Date.now() + durationMs;
  await Promise.all(
    fleet.replicas.map(async (replica) => {
      while (Date.now() < end) {
        statuses.push(await fleet.callPlan(replica).catch(() => 599));
        await sleep(intervalMs);
      }
    }),
  );
  return statuses;
}
