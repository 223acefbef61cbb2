// Builds forwarding: per-operation circuits, the upstream socket pool and its bounded wait, the forwarder, plan reads.
import type { GatewayConfig } from '../config/gateway-config';
import {
  busySockets,
  type CircuitStateName,
  createForwarder,
  createMemoryAnswerCache,
  createPlanReader,
  createRedisAnswerCache,
  createUpstreamAgent,
  createUpstreamCircuits,
  createUpstreamSlots,
  type Forwarder,
  type PlanReader,
} from '../forwarding';
import { planCachePrefix } from '../keys/redis-keys';
import { FORWARDED_OPERATIONS } from '../routes/operation-routes';
import type { RedisClient } from '../store/redis-connection';
import type { RecordSeal, TokenProvider } from '../tokens';
import { type Built, building } from './lifecycle';
import type { Observability } from './observability';

const CIRCUIT_STATE_VALUE = { closed: 0, 'half-open': 1, open: 2 } as const;

export interface Forwarding {
  readonly forwarder: Forwarder;
  readonly plans: PlanReader;
  circuitStates(): Readonly<Record<string, CircuitStateName>>;
}

export function buildForwarding(
  config: GatewayConfig,
  upstreamBaseUrl: string,
  tokens: TokenProvider,
  redis: RedisClient | undefined,
  seal: RecordSeal,
  observability: Observability,
): Promise<Built<Forwarding>> {
  const { logger, metrics, tracing } = observability;
  return building((closers) => {
    const circuits = createUpstreamCircuits(FORWARDED_OPERATIONS, {
      ...config.upstream.circuit,
      onStateChange: (operation, state) => {
        metrics.circuitState.set({ operation }, CIRCUIT_STATE_VALUE[state]);
        logger.warn({ operation, circuit: state }, 'upstream circuit state changed');
      },
    });
    for (const operation of FORWARDED_OPERATIONS) metrics.circuitState.set({ operation }, 0);
    const agent = createUpstreamAgent(upstreamBaseUrl, config.upstream.maxSockets, {
      extraCa: config.upstream.extraCa,
    });
    closers.push(() => agent.destroy());
    const slots = createUpstreamSlots({
      limit: config.upstream.maxSockets,
      queueTimeoutMs: config.upstream.queueTimeoutMs,
    });
    metrics.watchUpstreamPool({ socketsInUse: () => busySockets(agent), waiting: () => slots.waiting });
    const forwarder = createForwarder({
      baseUrl: upstreamBaseUrl,
      agent,
      slots,
      tokens,
      circuits,
      timeoutMs: config.upstream.timeoutMs,
      staticHeaders: config.upstream.staticHeaders,
      metrics,
      logger,
      tracing,
    });
    const plans = createPlanReader({
      forwarder,
      cache: planCache(config, upstreamBaseUrl, redis, seal),
    });
    return { forwarder, plans, circuitStates: () => circuits.states() };
  });
}

/** Plan answers cached for PLAN_CACHE_TTL_SECONDS: shared and sealed in Redis, else in this process. */
function planCache(
  config: GatewayConfig,
  upstreamBaseUrl: string,
  redis: RedisClient | undefined,
  seal: RecordSeal,
) {
  const ttlSeconds = config.upstream.planCacheTtlSeconds;
  if (ttlSeconds <= 0) return undefined;
  const store = redis
    ? createRedisAnswerCache(redis, planCachePrefix(config.redis.keyPrefix, upstreamBaseUrl), seal)
    : createMemoryAnswerCache();
  return { store, ttlSeconds };
}
