// The zod schemas of the gateway's own answers (envelopes, probes), for /openapi.json. Operations are declared in the
// catalogue (OPERATIONS_FILE), not here.
import { z } from 'zod';
import type { ReadinessReport } from '../operations/readiness';

const upstreamStatus = z.object({ code: z.string(), description: z.string(), detail: z.string() });

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
          }),
        )
        .meta({
          description: 'Each provider account (SPEC §10): its token and its circuits, keyed by account id.',
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
