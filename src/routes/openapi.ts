// Builds the OpenAPI 3.1 document of the gateway from the same zod schemas that validate requests.
import { z } from 'zod';
import { REASON_STATUS } from '../http/gateway-error';
import { SESSION_PATHS, SESSION_SECURITY_SCHEME } from './openapi-sessions';
import {
  documentValidationAnswer,
  documentValidationRequest,
  errorEnvelope,
  planParams,
  subscriptionPlan,
  upstreamErrorAnswer,
} from './schemas';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: object) => ({ 'application/json': { schema } });

function errorResponses(reasons: (keyof typeof REASON_STATUS)[]) {
  const byStatus = new Map<number, string[]>();
  for (const reason of reasons)
    byStatus.set(REASON_STATUS[reason], [...(byStatus.get(REASON_STATUS[reason]) ?? []), reason]);
  return Object.fromEntries(
    [...byStatus].map(([status, names]) => [
      String(status),
      { description: names.join(', '), content: json(ref('ErrorEnvelope')) },
    ]),
  );
}

/** The errors every forwarded operation can answer, whatever its input. */
const FORWARDING_ERRORS = {
  ...errorResponses([
    'CLIENT_UNAUTHENTICATED',
    'CLIENT_FORBIDDEN',
    'RATE_LIMITED',
    'UPSTREAM_AUTH_FAILED',
    'UPSTREAM_IP_NOT_WHITELISTED',
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_TIMEOUT',
  ]),
  '503': {
    description:
      'UPSTREAM_UNAVAILABLE while the circuit is open; UPSTREAM_SATURATED when every upstream connection stayed busy for UPSTREAM_QUEUE_TIMEOUT_MS (both with Retry-After).',
    content: json(ref('ErrorEnvelope')),
  },
};

function schemaOf(schema: z.ZodType): object {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
  }) as Record<string, unknown>;
  return rest;
}

/** The named component schemas; references between them become `#/components/schemas/<name>`. */
function componentSchemas(named: Record<string, z.ZodType>): Record<string, object> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(named)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io: 'input',
    uri: (id) => `#/components/schemas/${id}`,
  });
  return Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _s, $id: _i, ...schema }]) => [id, schema as object]),
  );
}

/** Built once at start; the document is static for a given build and configuration (`sessions`: /bff/* is on). */
export function buildOpenApiDocument(version: string, options: { sessions?: boolean } = {}): object {
  const sessions = options.sessions === true;
  const planIdSchema = schemaOf(planParams.shape.internalId);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Payments BFF gateway',
      version,
      description:
        'Validated, sanitized access to the Payment Service API: document validation and subscription plans. ' +
        'The gateway holds the upstream credentials and tokens; callers authenticate with an API key or an SSO token.',
    },
    servers: [{ url: '/' }],
    security: [{ apiKey: [] }, { sso: [] }, ...(sessions ? [{ session: [] }] : [])],
    paths: {
      ...(sessions ? SESSION_PATHS : {}),
      '/api/validation/document': {
        post: {
          operationId: 'validateDocument',
          summary: 'Validate an identity document for a country (scope documents:validate).',
          requestBody: { required: true, content: json(ref('DocumentValidationRequest')) },
          responses: {
            '200': {
              description: 'The upstream verdict, passed through.',
              content: json(ref('DocumentValidationAnswer')),
            },
            '4XX': {
              description: 'Upstream 4xx answers pass through unchanged.',
              content: json(ref('UpstreamError')),
            },
            ...errorResponses(['INVALID_REQUEST', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE']),
            ...FORWARDING_ERRORS,
          },
        },
      },
      '/api/subscriptions/plan/{internalId}': {
        get: {
          operationId: 'getSubscriptionPlan',
          summary: 'Get a subscription plan by its internal id (scope plans:read).',
          parameters: [{ name: 'internalId', in: 'path', required: true, schema: planIdSchema }],
          responses: {
            '200': { description: 'The plan, passed through.', content: json(ref('SubscriptionPlan')) },
            '4XX': {
              description: 'Upstream answers such as plan-not-found pass through unchanged.',
              content: json(ref('UpstreamError')),
            },
            ...errorResponses(['INVALID_REQUEST']),
            ...FORWARDING_ERRORS,
          },
        },
      },
      '/healthz': {
        get: {
          operationId: 'liveness',
          security: [],
          summary: 'Liveness: the process serves.',
          responses: { '200': { description: 'Alive.' } },
        },
      },
      '/readyz': {
        get: {
          operationId: 'readiness',
          security: [],
          summary: 'Readiness with the state of each check.',
          responses: {
            '200': { description: 'Ready (possibly degraded).' },
            '503': { description: 'Not ready.' },
          },
        },
      },
      '/metrics': {
        get: {
          operationId: 'metrics',
          security: [],
          summary: 'Prometheus metrics.',
          responses: { '200': { description: 'Text exposition format.', content: { 'text/plain': {} } } },
        },
      },
      '/openapi.json': {
        get: {
          operationId: 'openapi',
          security: [],
          summary: 'This document.',
          responses: { '200': { description: 'OpenAPI 3.1.', content: { 'application/json': {} } } },
        },
      },
    },
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        sso: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
        ...(sessions ? { session: SESSION_SECURITY_SCHEME } : {}),
      },
      schemas: componentSchemas({
        DocumentValidationRequest: documentValidationRequest,
        DocumentValidationAnswer: documentValidationAnswer,
        SubscriptionPlan: subscriptionPlan,
        UpstreamError: upstreamErrorAnswer,
        ErrorEnvelope: errorEnvelope,
      }),
    },
  };
}
