// One zod schema per operation: it validates and sanitizes requests, and it generates /openapi.json.
import { z } from 'zod';

/** No control characters (C0, DEL, C1): they have no place in a document id or type and break logs and headers. */
const NO_CONTROL_CHARACTERS = /^[^\p{Cc}]*$/u;

const boundedText = (max: number, example: string) =>
  z
    .string()
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`)
    .regex(NO_CONTROL_CHARACTERS, 'must not contain control characters')
    .meta({ example });

/**
 * Body of POST /api/validation/document. Objects are stripped: unknown fields at any depth are dropped
 * before forwarding, so nothing but these three fields ever reaches the upstream.
 */
export const documentValidationRequest = z
  .object({
    country: z
      .string()
      .regex(/^[A-Z]{3}$/, 'must be three upper-case letters (ISO 3166-1 alpha-3)')
      .meta({ example: 'ARG' }),
    document: z
      .object({
        id: boundedText(64, '20-17254359-7'),
        type: boundedText(32, 'CUIT'),
      })
      .strip(),
  })
  .strip()
  .meta({ description: 'A document to validate for a country.' });

export type DocumentValidationRequest = z.infer<typeof documentValidationRequest>;

/** Path parameters of GET /api/subscriptions/plan/:internalId: a UUID of any version, any case. */
export const planParams = z.object({
  internalId: z
    .string()
    .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'must be a UUID')
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
    description: 'An upstream error body passed through unchanged (e.g. the plan-not-found answer).',
  });

export const errorEnvelope = z
  .object({
    status: z.object({
      code: z.string().meta({ description: 'The HTTP status, as a string.' }),
      description: z.string().meta({ description: 'The UPPER_SNAKE reason, e.g. INVALID_REQUEST.' }),
      detail: z.string().meta({ description: 'A sentence for humans.' }),
    }),
    requestId: z.string(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .meta({ description: 'Every error the gateway itself makes (SPEC §3).' });
