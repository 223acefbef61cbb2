// Forwarding's public surface: the rest of the gateway imports forwarding from here, never from internal/.

export type { AnswerCache } from './internal/answer-cache';
export { createMemoryAnswerCache, createRedisAnswerCache } from './internal/answer-cache';
export { type CircuitStateName, createUpstreamCircuits } from './internal/circuit-breaker';
export {
  createForwarder,
  type Forwarder,
  type ForwarderBudget,
  sendAnswer,
  type UpstreamAnswer,
  type UpstreamExchange,
} from './internal/forwarder';
export { createPlanReader, type PlanReader } from './internal/plan-reader';
export { busySockets, createUpstreamAgent } from './internal/upstream-agent';
export { createUpstreamSlots } from './internal/upstream-slots';

import type { Forwarder } from './internal/forwarder';
import type { PlanReader } from './internal/plan-reader';

/** What a request uses of the provider account it was given (SPEC §10): the account's forwarder and plan reads. */
export interface AccountForwarding {
  readonly id: string;
  readonly forwarder: Forwarder;
  readonly plans: PlanReader;
}
