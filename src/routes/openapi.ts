// Builds the OpenAPI 3.1 document of the gateway from the same zod schemas that validate requests.
import { z } from 'zod';
import { ACCOUNT_ID_PATTERN } from '../config/account-spec';
import { EVERY_ROUTE_ERRORS, PLAN_ERRORS, UNMATCHED_ERRORS, VALIDATION_ERRORS } from './openapi-catalogue';
import { jsonContent, type ResponseOptions, responsesOf, schemaRef } from './openapi-responses';
import { SESSION_SECURITY_SCHEME, sessionPaths } from './openapi-sessions';
import {
  documentValidationAnswer,
  documentValidationRequest,
  errorEnvelope,
  livenessAnswer,
  planParams,
  readinessAnswer,
  subscriptionPlan,
  upstreamErrorAnswer,
} from './schemas';

export interface OpenApiOptions {
  /** Browser sessions are on: /bff/* and the session cookie scheme. */
  readonly sessions?: boolean;
  /** Local mode: every answer carries X-Upstream: simulator. */
  readonly localMode?: boolean;
}

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

/** The request headers both forwarded operations read (X-CSRF with browser sessions on). */
function operationRequestHeaders(sessions: boolean): object[] {
  return [
    {
      name: 'X-Upstream-Account',
      in: 'header',
      required: false,
      description:
        'One of the provider accounts the client may use (its registry entry’s `accounts`); absent: its default, the first.',
      schema: { type: 'string', pattern: ACCOUNT_ID_PATTERN.source },
    },
    {
      name: 'X-Request-Id',
      in: 'header',
      required: false,
      description: 'Kept when well formed (and forwarded to the provider); otherwise the gateway makes one.',
      schema: { type: 'string' },
    },
    ...(sessions
      ? [
          {
            name: 'X-CSRF',
            in: 'header',
            required: false,
            description: 'Must be 1 when the call authenticates with the session cookie.',
            schema: { type: 'string', const: '1' },
          },
        ]
      : []),
  ];
}

/** The two forwarded operations: GET and HEAD of a plan, POST of a document. */
function operationPaths(options: ResponseOptions, sessions: boolean): Record<string, object> {
  const planIdSchema = schemaOf(planParams.shape.internalId);
  const requestHeaders = operationRequestHeaders(sessions);
  const planParameters = [
    { name: 'internalId', in: 'path', required: true, schema: planIdSchema },
    ...requestHeaders,
  ];
  const planResponses = (head: boolean) =>
    responsesOf(
      {
        route: 'forwarded',
        answers: {
          '200': {
            description: 'The plan, passed through.',
            content: jsonContent(schemaRef('SubscriptionPlan')),
          },
        },
        errors: PLAN_ERRORS,
        passThrough: true,
      },
      { ...options, head },
    );
  return {
    '/api/validation/document': {
      post: {
        operationId: 'validateDocument',
        summary: 'Validate an identity document for a country (scope documents:validate).',
        parameters: [
          ...requestHeaders,
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            description:
              'Optional (draft-ietf-httpapi-idempotency-key-header): 1–255 visible ASCII characters. The first request is forwarded once for the fleet; a repeat with the same body gets its answer with Idempotent-Replayed: true (docs/idempotency.md).',
            schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
          },
        ],
        requestBody: { required: true, content: jsonContent(schemaRef('DocumentValidationRequest')) },
        responses: responsesOf(
          {
            route: 'forwarded',
            answers: {
              '200': {
                description: 'The upstream verdict, passed through.',
                content: jsonContent(schemaRef('DocumentValidationAnswer')),
              },
            },
            errors: VALIDATION_ERRORS,
            passThrough: true,
          },
          options,
        ),
      },
    },
    '/api/subscriptions/plan/{internalId}': {
      get: {
        operationId: 'getSubscriptionPlan',
        summary: 'Get a subscription plan by its internal id, a UUID in any case (scope plans:read).',
        parameters: planParameters,
        responses: planResponses(false),
      },
      head: {
        operationId: 'headSubscriptionPlan',
        summary: 'As GET, without the body: answered from a GET answer (the provider only ever sees a GET).',
        parameters: planParameters,
        responses: planResponses(true),
      },
    },
  };
}

/** An unauthenticated probe path: GET and HEAD, the same answers. */
function probe(
  operationId: string,
  summary: string,
  answers: Record<string, { description: string; content?: object }>,
  options: ResponseOptions,
) {
  const responses = (head: boolean) =>
    responsesOf({ route: 'probe', answers, errors: EVERY_ROUTE_ERRORS }, { ...options, head });
  const capitalized = operationId.charAt(0).toUpperCase() + operationId.slice(1);
  return {
    get: { operationId, security: [], summary, responses: responses(false) },
    head: {
      operationId: `head${capitalized}`,
      security: [],
      summary: `${summary} Without a body.`,
      responses: responses(true),
    },
  };
}

function probePaths(options: ResponseOptions): Record<string, object> {
  const readiness = jsonContent(schemaRef('Readiness'));
  return {
    '/healthz': probe(
      'liveness',
      'Liveness: the process serves; no dependency is checked.',
      { '200': { description: 'Alive.', content: jsonContent(schemaRef('Liveness')) } },
      options,
    ),
    '/readyz': probe(
      'readiness',
      'Readiness with the state of each check.',
      {
        '200': { description: 'Ready (possibly degraded).', content: readiness },
        '503': {
          description: 'Not ready: draining, or the provider refuses this gateway.',
          content: readiness,
        },
      },
      options,
    ),
    '/metrics': probe(
      'metrics',
      'Prometheus metrics (here unless METRICS_PORT gives them a port of their own).',
      {
        '200': {
          description: 'Text exposition format.',
          content: { 'text/plain': { schema: { type: 'string' } } },
        },
      },
      options,
    ),
    '/openapi.json': probe(
      'openapi',
      'This document.',
      { '200': { description: 'OpenAPI 3.1.', content: jsonContent({ type: 'object' }) } },
      options,
    ),
  };
}

/** The answers of paths and methods no operation lists: reusable responses a client can refer to. */
function unmatchedResponses(options: ResponseOptions): Record<string, object> {
  const all = responsesOf({ route: 'unmatched', errors: UNMATCHED_ERRORS }, options);
  return { NotFound: all['404'] as object, MethodNotAllowed: all['405'] as object };
}

/** Built once at start; the document is static for a given build and configuration. */
export function buildOpenApiDocument(version: string, options: OpenApiOptions = {}): object {
  const sessions = options.sessions === true;
  const answers: ResponseOptions = { localMode: options.localMode === true };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Payments BFF gateway',
      version,
      description:
        'Validated, sanitized access to the Payment Service API: document validation and subscription plans. ' +
        'The gateway holds the upstream credentials and tokens; callers authenticate with an API key or an SSO token. ' +
        "Errors the gateway makes are ErrorEnvelope (with requestId); the provider's own answers pass through " +
        'unchanged as UpstreamError (no requestId). Any other path is components.responses.NotFound; a listed path ' +
        'with another method is components.responses.MethodNotAllowed.',
    },
    servers: [{ url: '/' }],
    security: [{ apiKey: [] }, { sso: [] }, ...(sessions ? [{ session: [] }] : [])],
    paths: {
      ...(sessions ? sessionPaths(answers) : {}),
      ...operationPaths(answers, sessions),
      ...probePaths(answers),
    },
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        sso: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
        ...(sessions ? { session: SESSION_SECURITY_SCHEME } : {}),
      },
      responses: unmatchedResponses(answers),
      schemas: componentSchemas({
        DocumentValidationRequest: documentValidationRequest,
        DocumentValidationAnswer: documentValidationAnswer,
        SubscriptionPlan: subscriptionPlan,
        UpstreamError: upstreamErrorAnswer,
        ErrorEnvelope: errorEnvelope,
        Liveness: livenessAnswer,
        Readiness: readinessAnswer,
      }),
    },
  };
}
