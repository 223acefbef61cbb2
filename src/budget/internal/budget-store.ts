// The narrow seam between an account's budget and the fleet state it shares: one exchange, and pause signals.
import type { ExchangeReply, ExchangeRequest } from './fleet-state';

/**
 * Signals published to every replica of an account: a pause (until epoch ms), its end, a lowered rate, and a
 * replica short of room for its critical or standard demand (the others exchange soon and give back what they hold
 * beyond their part).
 */
export type FleetSignal =
  | { readonly kind: 'pause'; readonly until: number }
  | { readonly kind: 'resume' }
  | { readonly kind: 'short' }
  | { readonly kind: 'decrease'; readonly rate: number };

/**
 * The store answered, with an error about the account's record (a key of the wrong type, a script error): the
 * store itself is reachable and healthy, only this budget cannot be shared until the record is fixed.
 */
export class BudgetRecordError extends Error {
  override readonly name = 'BudgetRecordError';
}

export interface BudgetStore {
  /** `redis` when shared by the fleet; `memory` in local mode or without Redis (this process is the fleet). */
  readonly kind: 'memory' | 'redis';
  /** One exchange with the fleet state (rejects when the store is unreachable). */
  exchange(request: ExchangeRequest): Promise<ExchangeReply>;
  /** Tells the other replicas at once; best effort (they also learn it at their next exchange). */
  publish(signal: FleetSignal): Promise<void>;
  /** Listens to the other replicas' signals until the returned function is called. */
  subscribe(listener: (signal: FleetSignal) => void): () => void;
  /**
   * A replica that stops cleanly takes its record out of the fleet state: what it held becomes grantable to the others
   * at their next exchange, not when its lease would have ended (a replica killed cannot: its lease ends it).
   */
  leave(replicaId: string): Promise<void>;
}

export function encodeSignal(signal: FleetSignal): string {
  if (signal.kind === 'pause') return `pause:${signal.until}`;
  if (signal.kind === 'decrease') return `decrease:${signal.rate}`;
  return signal.kind;
}

/** Undefined for anything else on the channel (written by whoever can publish on Redis): ignored. */
export function decodeSignal(message: string): FleetSignal | undefined {
  if (message === 'resume') return { kind: 'resume' };
  if (message === 'short') return { kind: 'short' };
  const [kind, value] = message.split(':', 2);
  const number = Number(value);
  if (!Number.isFinite(number) || number <= 0) return undefined;
  if (kind === 'pause') return { kind: 'pause', until: number };
  if (kind === 'decrease') return { kind: 'decrease', rate: number };
  return undefined;
}
