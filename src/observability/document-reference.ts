// The reference a log line carries instead of a document id: a keyed HMAC, so logs hold no personal data.
import { hash } from 'node:crypto';
import { deriveKey } from '../keys/derived-keys';

/** Hex characters kept (64 bits): enough to tell documents apart in an investigation. */
const REFERENCE_HEX_CHARS = 16;
const SHA256_BLOCK_BYTES = 64;

/** Names one document in logs without revealing it: the same id always gives the same reference, never the id. */
export type DocumentReference = (documentId: string) => string;

/**
 * HMAC-SHA256 under a key derived from TOKEN_ENCRYPTION_KEY ('log-reference'): stable across replicas and restarts,
 * and nobody without the key can test a guessed id against the logs (a plain hash of an 11-digit id falls to brute
 * force in seconds). Without the key (local mode, tests) the key is random per process: stable within it only.
 *
 * Computed as RFC 2104 spells it, H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ m)), with the padded keys prepared once and
 * crypto.hash: the same value as keyedReference() (a test compares them), at a fraction of createHmac's cost,
 * which sets up an OpenSSL HMAC context per call — this runs on every validation request.
 */
export function createDocumentReference(encryptionKey: Buffer | undefined): DocumentReference {
  const key = deriveKey(encryptionKey, 'log-reference'); // 32 bytes: shorter than a block, so zero-padded
  const innerPad = paddedKey(key, 0x36);
  const outerPad = paddedKey(key, 0x5c);
  return (documentId) => {
    const inner = hash('sha256', Buffer.concat([innerPad, Buffer.from(documentId, 'utf8')]), 'buffer');
    return hash('sha256', Buffer.concat([outerPad, inner]), 'hex').slice(0, REFERENCE_HEX_CHARS);
  };
}

function paddedKey(key: Buffer, pad: number): Buffer {
  const block = Buffer.alloc(SHA256_BLOCK_BYTES, pad);
  for (let i = 0; i < key.length; i++) block[i] = (key[i] as number) ^ pad;
  return block;
}
