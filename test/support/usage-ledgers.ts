// A replica's usage ledger on a fake clock, as the ledger tests drive it.
import type { LedgerStore } from '../../src/usage/internal/ledger-store';
import { UsageLedger } from '../../src/usage/internal/usage-ledger';

/** A replica's ledger on `store` and the fake clock, flushed every second as the gateway's is. */
export function ledgerOn(store: LedgerStore, clock: { now: number }, replicaId: string): UsageLedger {
  return new UsageLedger({
    store,
    retentionDays: 400,
    now: () => clock.now,
    replicaId,
    flushIntervalMs: 1000,
  });
}
