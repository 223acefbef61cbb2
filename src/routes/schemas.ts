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
