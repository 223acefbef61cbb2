// The narrow seam between an account's budget and the fleet state it shares: one exchange, and pause signals.
import type { ExchangeReply, ExchangeRequest } from './fleet-state';

/** Signals published to every replica of an account: a pause (until epoch ms), its end, a lowered rate. */
export type FleetSignal =
  | { readonly kind: 'pause'; readonly until: number }
  | { readonly kind: 'resume' }
  | { readonly kind: 'decrease'; readonly rate: number };

export interface BudgetStore {
  /** `redis` when shared by the fleet; `memory` in local mode or without Redis (this process is the fleet). */
  readonly kind: 'memory' | 'redis';
  /** One exchange with the fleet state (rejects when the store is unreachable). */
  exchange(request: ExchangeRequest): Promise<ExchangeReply>;
  /** Tells the other replicas at once; best effort (they also learn it at their next exchange). */
  publish(signal: FleetSignal): Promise<void>;
  /** Listens to the other replicas' signals until the returned function is called. */
  subscribe(listener: (signal: FleetSignal) => void): () => void;
}

export function encodeSignal(signal: FleetSignal): string {
  if (signal.kind === 'pause') return `pause:${signal.until}`;
  if (signal.kind === 'decrease') return `decrease:${signal.rate}`;
  return 'resume';
}

/** Undefined for anything else on the channel (written by whoever can publish on Redis): ignored. */
export function decodeSignal(message: string): FleetSignal | undefined {
  if (message === 'resume') return { kind: 'resume' };
  const [kind, value] = message.split(':', 2);
  const number = Number(value);
  if (!Number.isFinite(number) || number <= 0) return undefined;
  if (kind === 'pause') return { kind: 'pause', until: number };
  if (kind === 'decrease') return { kind: 'decrease', rate: number };
  return undefined;
}
