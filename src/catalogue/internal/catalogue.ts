// What a loaded catalogue is: the operations the gateway serves, each compiled once, and the published document.
import type { AnswerFilter } from './answer-filter';
import type { RequestValidator } from './request-validator';

export type OperationMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface CatalogueOperation {
  /** The operationId: its name everywhere (circuit, metrics label, ledger column, request log). */
  readonly id: string;
  readonly method: OperationMethod;
  /** The OpenAPI path template (`/api/subscriptions/plan/{internalId}`). */
  readonly path: string;
  /** The same as an Express route (`/api/subscriptions/plan/:internalId`). */
  readonly route: string;
  readonly scope: string;
  /**
   * strict / passthrough: the answer is read (buffered, filtered when strict, coalesced, cached, kept for a replay);
   * stream: piped to the caller as it arrives (never buffered, never coalesced).
   */
  readonly answer: 'strict' | 'passthrough' | 'stream';
  /** `cache.ttlSeconds` (GET only); undefined when the document says nothing. */
  readonly cacheTtlSeconds?: number;
  readonly idempotency: 'none' | 'optional' | 'required';
  readonly forwardIdempotencyKey: boolean;
  readonly timeoutMs?: number;
  /** The operation takes a JSON body (its requestBody). */
  readonly hasBody: boolean;
  readonly request: RequestValidator;
  /** `answer: strict`: the filter of its answers (every strict operation has one; docs/catalogue.md, Answers). */
  readonly filterAnswer?: AnswerFilter;
  /**
   * What shapes the answers the gateway keeps (cache): a short hash of `answer` and the 2xx response schemas, the
   * same on every replica that loads the same document. A reload that changes them changes it, so an answer kept
   * under the old schema (a field since dropped) is never served again.
   */
  readonly answerVersion: string;
}

export interface Catalogue {
  /** Served operations, in the order the router tries them (literal paths before templated ones). */
  readonly operations: readonly CatalogueOperation[];
  /** Operations declared without a scope (an imported draft, say): not served, not an error. */
  readonly unserved: readonly string[];
  /** The document without `x-gateway`, for /openapi.json. */
  readonly published: {
    readonly paths: Record<string, unknown>;
    readonly components: Record<string, unknown>;
  };
}
