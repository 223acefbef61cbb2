// One zod schema per operation: it validates and sanitizes requests, and it generates /openapi.json.
import { z } from 'zod';
import type { ReadinessReport } from '../operations/readiness';
import { ALPHA3_COUNTRY_CODES } from './country-codes';

/**
 * Document ids as the provider writes them: ASCII letters and digits, with the separators it accepts (`.` `-` `/`
 * and space) inside, never at either end. `Ñ` and `&` are the only others: Mexico's RFC uses them. Anything else —
 * full-width or Arabic-Indic digits, bidi controls, zero-width characters, look-alike letters — is refused.
 */
const DOCUMENT_ID = /^[A-Za-z0-9Ñ&](?:[A-Za-z0-9Ñ&./ -]*[A-Za-z0-9Ñ&])?$/;
/** Document types as the provider names them: CUIT, CPF, CNPJ, RUT, … */
const DOCUMENT_TYPE = /^[A-Z0-9_]+$/;

/**
 * Body of POST /api/validation/document. Objects are stripped: unknown fields at any depth are dropped
 * before forwarding, so nothing but these three fields ever reaches the upstream.
 */
export const documentValidationRequest = z
  .object({
    country: z
      .enum(ALPHA3_COUNTRY_CODES, { error: 'must be an ISO 3166-1 alpha-3 country code (e.g. ARG)' })
      .meta({ example: 'ARG' }),
    document: z
      .object({
        id: z
          .string()
          .min(1, { error: 'must not be empty', abort: true })
          .max(32, { error: 'must be at most 32 characters', abort: true })
          .regex(
            DOCUMENT_ID,
            'must be ASCII letters and digits, with . - / or spaces between them (and Ñ & for RFCs)',
          )
          .meta({ example: '20-17254359-7' }),
        type: z
          .string()
          .min(1, { error: 'must not be empty', abort: true })
          .max(32, { error: 'must be at most 32 characters', abort: true })
          .regex(DOCUMENT_TYPE, 'must be upper-case ASCII letters, digits and _ (e.g. CUIT, CPF)')
          .meta({ example: 'CUIT' }),
      })
      .strip(),
  })
  .strip()
  .meta({ description: 'A document to validate for a country.' });

export type DocumentValidationRequest = z.infer<typeof documentValidationRequest>;

/**
 * A UUID of any version, any case. Spelled with both cases rather than the `i` flag: JSON Schema patterns have no
 * flags, so a flag would be lost on the way to /openapi.json and the document would refuse upper-case ids.
 */
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** Path parameters of GET /api/subscriptions/plan/:internalId. */
export const planParams = z.object({
  internalId: z
    .string()
    .regex(UUID, 'must be a UUID')
    .meta({ example: 'b8546575-5d4f-4a56-9e21-522d01cf5992' }),
});

// Answers are the upstream's and pass through unchanged; these schemas document them.
const upstreamStatus = z.object({ code: z.string(), description: z.string(), detail: z.string() });

export const documentValidationAnswer = z
  .object({ code: z.enum(['200', '300']), description: z.string() })
  .meta({
    description:
      'The upstream verdict: code "200" valid, "300" invalid (the description names the bad parameter).',
  });

export const subscriptionPlan = z
  .object({
    internalId: z.string(),
    name: z.string(),
    description: z.string(),
    amount: z.number(),
    country: z.string(),
    currency: z.string(),
    accountNumber: z.string(),
    autoRecurring: z.object({ repetitions: z.number().int(), type: z.string(), frequency: z.number().int() }),
    status: upstreamStatus,
  })
  .meta({ description: 'A subscription plan as the upstream returns it.' });

export const upstreamErrorAnswer = z
  .object({ status: upstreamStatus, errors: z.array(z.unknown()).optional() })
  .meta({
    description:
      "The provider's own error body, passed through unchanged with the provider's HTTP status (e.g. the " +
      'plan-not-found answer, a 400, a 429 with its Retry-After). It has no requestId: that is how a client tells ' +
      "it from the gateway's ErrorEnvelope.",
  });

export const errorEnvelope = z
  .object({
    status: z.object({
      code: z.string().meta({ description: 'The HTTP status, as a string.' }),
      description: z.string().meta({ description: 'The UPPER_SNAKE reason, e.g. INVALID_REQUEST.' }),
      detail: z.string().meta({ description: 'A sentence for humans.' }),
    }),
    requestId: z
      .string()
      .meta({ description: 'The X-Request-Id of the exchange: quote it when asking for help.' }),
    errors: z
      .array(z.object({ path: z.string(), message: z.string() }))
      .optional()
      .meta({ description: 'INVALID_REQUEST only: each bad field and what is wrong with it.' }),
  })
  .meta({ description: 'Every error the gateway itself makes.' });

/** GET /healthz: the process serves. */
export const livenessAnswer = z.object({ status: z.literal('ok') });

const checkState = z.enum(['ok', 'degraded', 'failing']);

const rateOrNull = z.number().nullable();

/** One account's provider budget as this replica applies it (informative: it never changes the readiness). */
const budgetCheck = z
  .object({
    configuredRate: rateOrNull.meta({
      description: 'The account\'s "budget" in calls per second; null: none.',
    }),
    effectiveRate: rateOrNull.meta({ description: 'min(configured, learned); null: unbounded.' }),
    learnedRate: rateOrNull.meta({
      description: "Taught by the provider's 429s without Retry-After (AIMD).",
    }),
    pausedUntil: z.string().nullable().meta({
      description: "ISO time the fleet's pause ends (the provider's Retry-After); null: not paused.",
    }),
    probing: z
      .boolean()
      .meta({ description: "This replica holds the fleet's one probe that ends the pause." }),
    degraded: z
      .boolean()
      .meta({ description: 'Shared store unreachable: keeping to budget / replicas last seen.' }),
    replicas: z.number().meta({ description: 'Live replicas at the last exchange, this one included.' }),
    allocation: z
      .object({ critical: z.number(), standard: z.number(), sheddable: z.number() })
      .nullable()
      .meta({ description: "This replica's rates by priority (calls per second); null: unbounded." }),
    fleetShare: rateOrNull.meta({ description: "This replica's part of the effective rate (0 to 1)." }),
  })
  .meta({ description: 'The provider budget (SPEC §11) of this account in this replica.' });

/** GET /readyz: the readiness report (src/operations/readiness.ts; the type check below keeps the two equal). */
export const readinessAnswer = z
  .object({
    status: z.enum(['ready', 'degraded', 'not-ready']),
    checks: z.object({
      draining: z.boolean(),
      store: z.object({ state: checkState, kind: z.enum(['redis', 'memory']) }),
      upstreamToken: z.object({ state: checkState, detail: z.string() }),
      circuits: z.record(z.string(), z.object({ state: z.string() })),
      accounts: z
        .record(
          z.string(),
          z.object({
            state: checkState,
            detail: z.string(),
            circuits: z.record(z.string(), z.object({ state: z.string() })),
            budget: budgetCheck.optional(),
          }),
        )
        .meta({
          description:
            'Each provider account (SPEC §10): its token, its circuits and its provider budget, keyed by account id.',
        }),
      clientRegistry: z
        .object({ state: checkState, detail: z.string(), staleSince: z.string().optional() })
        .optional(),
    }),
  })
  .meta({ description: "The replica's readiness and the state of each check; never a secret." });

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
/** Fails the type check when the readiness report and its documented schema drift apart. */
export type ReadinessDocumented = Assert<Same<z.output<typeof readinessAnswer>, ReadinessReport>>;
