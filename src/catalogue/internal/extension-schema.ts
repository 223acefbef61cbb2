// The JSON Schema of `x-gateway` (SPEC §12), checked in as config/operations.schema.json; a unit test keeps the two
// equal.

/** A scope an operation requires and a registry grants: `plans:read`, `subscriptions.read`, … */
export const SCOPE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$/;

export const EXTENSION_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'https://payments-bff.internal/operations.schema.json',
  title: 'x-gateway',
  description:
    "OPERATIONS_FILE (SPEC §12): the gateway's extension on an OpenAPI 3.1 operation. An operation is served only when it carries x-gateway with a scope.",
  type: 'object',
  additionalProperties: false,
  properties: {
    scope: {
      description:
        'The scope a caller needs (registry scopes, SSO scopes). Absent: the operation is not served (an imported draft).',
      type: 'string',
      pattern: SCOPE_PATTERN.source,
    },
    upstream: {
      type: 'object',
      additionalProperties: false,
      required: ['path'],
      properties: {
        path: {
          description:
            "The provider's path, `{name}` filled from the operation's path parameters; default: the operation's own path. Never another host.",
          type: 'string',
          pattern: '^/',
          maxLength: 500,
        },
      },
    },
    answer: {
      description:
        'strict (default): a 2xx JSON answer keeps only the properties its documented response schema declares, at every depth (a 2xx documented without a schema, or not at all, answers {}; JSON that does not parse is refused, 502); passthrough: as the provider sent it; stream: piped to the caller as it arrives, never buffered (large answers: exports, documents), no cache, no coalescing, no idempotency.',
      enum: ['strict', 'passthrough', 'stream'],
    },
    cache: {
      description: 'GET only: complete 200 answers kept this many seconds (per account and merchant).',
      type: 'object',
      additionalProperties: false,
      required: ['ttlSeconds'],
      properties: { ttlSeconds: { type: 'integer', minimum: 0, maximum: 86400 } },
    },
    idempotency: {
      description: 'SPEC §13; methods other than GET/HEAD only.',
      enum: ['none', 'optional', 'required'],
    },
    forwardIdempotencyKey: {
      description: 'true when the provider honours Idempotency-Key itself (SPEC §13).',
      type: 'boolean',
    },
    timeoutMs: {
      description: "This operation's upstream timeout; at most UPSTREAM_TIMEOUT_MS.",
      type: 'integer',
      minimum: 1,
    },
  },
} as const;

/** What `x-gateway` says, once the schema accepted it. */
export interface GatewayExtension {
  readonly scope?: string;
  readonly upstream?: { readonly path: string };
  readonly answer?: 'strict' | 'passthrough' | 'stream';
  readonly cache?: { readonly ttlSeconds: number };
  readonly idempotency?: 'none' | 'optional' | 'required';
  readonly forwardIdempotencyKey?: boolean;
  readonly timeoutMs?: number;
}
