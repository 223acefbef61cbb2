// Forwarding's public surface: the rest of the gateway imports forwarding from here, never from internal/.

export type { AnswerCache } from './internal/answer-cache';
export { createMemoryAnswerCache, createRedisAnswerCache } from './internal/answer-cache';
export { type AnswerReader, createAnswerReader, type ReadExchange } from './internal/answer-reader';
export { type CircuitStateName, createUpstreamCircuits } from './internal/circuit-breaker';
export {
  createForwarder,
  type Forwarder,
  type ForwarderBudget,
  type StreamForwarder,
  sendAnswer,
  type UpstreamAnswer,
  type UpstreamExchange,
} from './internal/forwarder';
export { busySockets, createUpstreamAgent } from './internal/upstream-agent';
export { createUpstreamPool, poolSocketsInUse } from './internal/upstream-pool';
export { createUpstreamSlots } from './internal/upstream-slots';

import type { AnswerReader } from './internal/answer-reader';
import type { Forwarder, StreamForwarder } from './internal/forwarder';

/** What a request uses of the provider account it was given (SPEC §10): the account's forwarder and GET reads. */
export interface AccountForwarding {
  readonly id: string;
  readonly forwarder: Forwarder & StreamForwarder;
  readonly reads: AnswerReader;
}
