// The client registry file format: one zod schema for loading, the CLI and the JSON Schema.
import { z } from 'zod';
import { SCOPE_PATTERN } from '../catalogue';
import { ACCOUNT_ID_PATTERN } from '../config/account-spec';
import { PRIORITIES, prioritySchema } from '../config/budget-schema';

/** Client ids become metric labels and log fields: a short, bounded alphabet. */
export const CLIENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** `sha256:` and the lower- or upper-case hex of the SHA-256 of the key. */
export const KEY_HASH_PATTERN = /^sha256:[0-9a-fA-F]{64}$/;
/** Same shape as CORS_ORIGINS: scheme, host and optional port, no path. */
export const ORIGIN_PATTERN = /^https?:\/\/[^/\s]+$/;

/** Any scope an operation of the catalogue may require (OPERATIONS_FILE is reloaded apart from this file). */
const scopeSchema = z
  .string()
  .regex(
    SCOPE_PATTERN,
    'must be a scope: a letter or digit, then letters, digits and _ . : / - (e.g. plans:read)',
  );

/** A request budget: `limit` (described by `limitDescription`) per window. */
function limitSchema(limitDescription: string) {
  return z.strictObject({
    limit: z.int().min(1).max(1_000_000).meta({ description: limitDescription }),
    windowSeconds: z.int().min(1).max(86_400).meta({ description: 'Window length in seconds.' }),
  });
}

/** A count of billable provider calls: whole, 0 or more (0 refuses every call that would reach the provider). */
const quotaCount = (period: string) =>
  z
    .int({ error: 'must be a whole number of calls' })
    .min(0, 'must be 0 or more (0 refuses every call that would reach the provider)')
    .max(1_000_000_000_000)
    .optional()
    .meta({
      description: `Billable provider calls allowed per calendar ${period}, per account the client uses.`,
    });

/** Whether Intl knows the IANA name (the quota's periods are computed with it). */
function isKnownTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

const quotaSchema = z
  .strictObject({
    day: quotaCount('day'),
    month: quotaCount('month'),
    timezone: z
      .string()
      .refine(isKnownTimeZone, 'must be a known IANA timezone such as "America/Sao_Paulo" or "UTC"')
      .optional()
      .meta({ description: 'IANA timezone of the calendar days and months (default UTC).' }),
  })
  .refine((quota) => quota.day !== undefined || quota.month !== undefined, {
    message: 'must set "day", "month" or both',
  })
  .meta({
    description:
      'Billable provider calls per calendar day and/or month, counted separately for each provider account the client uses; over it, 429 QUOTA_EXCEEDED.',
  });

export const clientEntrySchema = z
  .strictObject({
    id: z
      .string()
      .regex(
        CLIENT_ID_PATTERN,
        'must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit',
      )
      .meta({
        description: 'Client id: used in logs, metrics and rate-limit keys.',
        examples: ['checkout-web'],
      }),
    keys: z
      .array(
        z
          .string()
          .regex(KEY_HASH_PATTERN, 'must be "sha256:" followed by the 64 hex digits of the key\'s hash'),
      )
      .default([])
      .meta({
        description:
          'SHA-256 hashes of the client\'s API keys ("sha256:<hex>"). Several during a rotation. Never the keys themselves: `npm run client-key` prints both. May be empty for a web app that only uses browser sessions, and for an SSO client when OIDC_ISSUER is set.',
      }),
    scopes: z
      .array(scopeSchema)
      .min(1, 'must list at least one scope')
      .meta({ description: 'Routes this client may call.' }),
    accounts: z
      .array(
        z.string().regex(ACCOUNT_ID_PATTERN, 'must be an account id: lower-case letters, digits and dashes'),
      )
      .min(1, 'must list at least one account (or leave "accounts" out while only one is configured)')
      .refine((ids) => new Set(ids).size === ids.length, 'must not list an account twice')
      .optional()
      .meta({
        description:
          'Provider accounts (ids of UPSTREAM_ACCOUNTS_FILE) this client may use; the first is its default, X-Upstream-Account picks another. Required when more than one account is configured.',
        examples: [['sandbox', 'production']],
      }),
    rateLimit: limitSchema('Requests allowed per window, across all replicas.')
      .optional()
      .meta({ description: 'Per-client limit; RATE_LIMIT_DEFAULT_* applies when absent.' }),
    priority: prioritySchema.optional().meta({
      description: `Who is cut first when an account's provider budget is short (SPEC §11): ${PRIORITIES.join(', ')} (default standard).`,
    }),
    quota: quotaSchema.optional(),
    origins: z
      .array(z.string().regex(ORIGIN_PATTERN, 'must be an origin like https://app.example.com (no path)'))
      .optional()
      .meta({
        description:
          "Browser origins of this client's web app, allowed by CORS (in addition to CORS_ORIGINS).",
      }),
    session: z
      .strictObject({
        claim: z
          .string()
          .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be a claim name like groups')
          .meta({
            description: 'The ID token / userinfo claim whose values grant scopes (a string or a list).',
          }),
        grants: z
          .record(z.string().min(1).max(256), z.array(scopeSchema))
          .meta({ description: 'Claim value -> the gateway scopes it grants (never more than `scopes`).' }),
        userRateLimit: limitSchema('Requests one user may make per window.').optional().meta({
          description:
            "Per-user limit inside the web app's own `rateLimit`, counted across all replicas: one user cannot spend the whole app's budget.",
        }),
      })
      .optional()
      .meta({
        description:
          "This client is the web app of browser sessions (its id is SESSION_CLIENT_ID): how a user's claims map to scopes.",
      }),
  })
  .meta({
    description:
      'One caller of the gateway: an API-key client (keys), a session web app (session), or, with OIDC_ISSUER set, an SSO client (neither: it lends its accounts, limits, priority and quota to bearer tokens whose azp/client_id is its id).',
  });

export const clientRegistrySchema = z
  .strictObject({
    $schema: z.string().optional().meta({ description: 'Editor hint; ignored by the gateway.' }),
    clients: z
      .array(clientEntrySchema)
      .meta({ description: 'Every client allowed to call the gateway with an API key.' }),
  })
  .meta({
    title: 'Payments BFF gateway client registry',
    description:
      'CLIENTS_FILE: who may call the gateway, with which keys, scopes, limits and browser origins.',
  });

export type ClientEntry = z.infer<typeof clientEntrySchema>;
export type ClientRegistryFile = z.infer<typeof clientRegistrySchema>;

/** The JSON Schema (draft 2020-12) checked in as config/clients.schema.json; a unit test keeps the two equal. */
export function registryJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(clientRegistrySchema, { target: 'draft-2020-12' }) as Record<string, unknown>;
}
