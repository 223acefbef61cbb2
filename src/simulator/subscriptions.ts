// Seeded subscriptions: the provider's third operation (GET /api/subscriptions/{id}), which the shipped catalogue does
// not declare, so a newcomer can declare it (README, "Adding a provider operation").
import { SEED_PLAN_ID } from './plans';

export interface Subscription {
  id: string;
  planId: string;
  status: 'ACTIVE' | 'CANCELLED';
  startedAt: string;
  nextChargeAt: string | null;
  /** The provider's internal field: a strict catalogue entry that does not document it keeps it from callers. */
  riskScore: number;
}

export const SEED_SUBSCRIPTION_ID = 'sub_7Hq2Lm9X';

const SUBSCRIPTIONS: readonly Subscription[] = [
  {
    id: SEED_SUBSCRIPTION_ID,
    planId: SEED_PLAN_ID,
    status: 'ACTIVE',
    startedAt: '2026-01-15T12:00:00Z',
    nextChargeAt: '2026-12-15T12:00:00Z',
    riskScore: 0.12,
  },
  {
    id: 'sub_3Kd8Pq1Z',
    planId: SEED_PLAN_ID,
    status: 'CANCELLED',
    startedAt: '2025-06-01T09:30:00Z',
    nextChargeAt: null,
    riskScore: 0.71,
  },
];

export function findSubscription(id: string): Subscription | undefined {
  return SUBSCRIPTIONS.find((subscription) => subscription.id === id);
}

/** The default size of a statement export: large enough that no gateway would buffer it whole (3 MiB). */
export const STATEMENT_DEFAULT_KIB = 3 * 1024;
/** The largest statement the simulator writes (`?kib=`). */
export const STATEMENT_MAX_KIB = 64 * 1024;

/** Statements are written in chunks of this size, each made as it is sent (a large one is never held whole). */
export const STATEMENT_CHUNK_BYTES = 64 * 1024;
const LINE_BYTES = 64;

/**
 * Chunk `index` of a subscription's statement export (GET /api/subscriptions/{id}/statement): CSV lines of charges,
 * each padded to 64 bytes; the same bytes for the same id and index.
 */
export function statementChunk(id: string, index: number): Buffer {
  const chunk = Buffer.alloc(STATEMENT_CHUNK_BYTES, 0x20);
  const lines = STATEMENT_CHUNK_BYTES / LINE_BYTES;
  for (let i = 0; i < lines; i++) {
    const line = index * lines + i + 1;
    const row = `${line},${id},${(line * 7919) % 100_000}.${String(line % 100).padStart(2, '0')},ARS`;
    chunk.write(row.slice(0, LINE_BYTES - 1), i * LINE_BYTES);
    chunk[i * LINE_BYTES + LINE_BYTES - 1] = 0x0a;
  }
  return chunk;
}

/** The whole statement of `kib` KiB, as the simulator sends it (for tests to compare with). */
export function subscriptionStatement(id: string, kib = STATEMENT_DEFAULT_KIB): Buffer {
  const size = kib * 1024;
  const chunks: Buffer[] = [];
  for (let index = 0; index * STATEMENT_CHUNK_BYTES < size; index++) chunks.push(statementChunk(id, index));
  return Buffer.concat(chunks).subarray(0, size);
}
