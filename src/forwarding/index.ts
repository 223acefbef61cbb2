// Forwarding's public surface: the rest of the gateway imports forwarding from here, never from internal/.
export { createMemoryAnswerCache, createRedisAnswerCache } from './internal/answer-cache';
export { type CircuitStateName, createUpstreamCircuits } from './internal/circuit-breaker';
export { createForwarder, type Forwarder, sendAnswer } from './internal/forwarder';
export { createPlanReader, type PlanReader } from './internal/plan-reader';
export { busySockets, createUpstreamAgent } from './internal/upstream-agent';
export { createUpstreamSlots } from './internal/upstream-slots';
