// The record one Idempotency-Key holds in the shared store: first its claim, then the answer kept (JSON, then sealed).

/** An answer as the caller got it: status, the allow-listed headers, the body's exact bytes. */
export interface KeptAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/**
 * `claimed`: a replica is forwarding the request; it owns the key until `leaseUntil` (epoch ms). The record itself
 * lives for the whole TTL, so a repeat after the lease still finds it and tells "the replica died holding it" (lease
 * over: outcome unknown) from "never seen" (no record). `kept`: the answer, replayed to every repeat.
 */
export type IdempotencyRecord =
  | { readonly state: 'claimed'; readonly fingerprint: string; readonly leaseUntil: number }
  | { readonly state: 'kept'; readonly fingerprint: string; readonly answer: KeptAnswer };

interface StoredRecord {
  v: 1;
  st: 'c' | 'k';
  fp: string;
  /** Lease end (claimed). */
  lu?: number;
  s?: number;
  h?: Record<string, string>;
  b?: string;
}

export function encodeRecord(record: IdempotencyRecord): string {
  const stored: StoredRecord =
    record.state === 'claimed'
      ? { v: 1, st: 'c', fp: record.fingerprint, lu: record.leaseUntil }
      : {
          v: 1,
          st: 'k',
          fp: record.fingerprint,
          s: record.answer.status,
          h: { ...record.answer.headers },
          b: record.answer.body.toString('base64'),
        };
  return JSON.stringify(stored);
}

/** The record from its JSON text, or undefined unless every field has its shape (it came from the store). */
export function decodeRecord(text: string): IdempotencyRecord | undefined {
  let stored: Partial<StoredRecord> | null;
  try {
    stored = JSON.parse(text) as Partial<StoredRecord> | null;
  } catch {
    return undefined;
  }
  if (stored?.v !== 1 || typeof stored.fp !== 'string') return undefined;
  if (stored.st === 'c')
    return typeof stored.lu === 'number'
      ? { state: 'claimed', fingerprint: stored.fp, leaseUntil: stored.lu }
      : undefined;
  if (stored.st !== 'k' || !isStatus(stored.s) || typeof stored.b !== 'string' || !isHeaders(stored.h))
    return undefined;
  return {
    state: 'kept',
    fingerprint: stored.fp,
    answer: { status: stored.s, headers: stored.h, body: Buffer.from(stored.b, 'base64') },
  };
}

const isStatus = (value: unknown): value is number =>
  Number.isInteger(value) && (value as number) >= 100 && (value as number) <= 599;

const isHeaders = (value: unknown): value is Record<string, string> =>
  typeof value === 'object' &&
  value !== null &&
  !Array.isArray(value) &&
  Object.values(value).every((v) => typeof v === 'string');
