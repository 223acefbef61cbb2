// Seals what the fleet shares in Redis with the token cipher, and counts every record that does not open.
import type { TokenCipher } from './token-cipher';

/** The kinds of shared record (the label of store_records_rejected_total). */
export type RecordKind =
  | 'token_pair'
  | 'login_refusal'
  | 'login_transient'
  | 'plan_cache'
  | 'session'
  | 'login_state'
  | 'idempotency';

export interface RecordSeal {
  /** `text` as stored under `key` (AES-256-GCM with the key name as associated data when a key is configured). */
  seal(text: string, key: string): string;
  /**
   * The record stored under `key`, or undefined when it does not open or `parse` refuses it: tampered, forged,
   * sealed with another key or for another key name. Such a record is ignored and counted, never trusted.
   */
  open<T>(kind: RecordKind, raw: string, key: string, parse: (text: string) => T | undefined): T | undefined;
}

export function createRecordSeal(
  cipher: TokenCipher,
  rejected: { inc(labels: { kind: RecordKind }): void },
): RecordSeal {
  return {
    seal: (text, key) => cipher.seal(text, key),
    open(kind, raw, key, parse) {
      const text = cipher.open(raw, key);
      const value = text === undefined ? undefined : parse(text);
      if (value === undefined) rejected.inc({ kind });
      return value;
    },
  };
}
