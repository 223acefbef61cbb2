// Builds /openapi.json: the operations catalogue without x-gateway (the document that validates requests, SPEC §12),
// plus the gateway's own paths, envelopes and headers.
import { z } from 'zod';
import { type Catalogue, jsonSchemaOf } from '../catalogue';
import { ACCOUNT_ID_PATTERN } from '../config/account-spec';
import {
  BODY_OPERATION_ERRORS,
  EVERY_ROUTE_ERRORS,
  IDEMPOTENCY_ERRORS,
  PARAMETER_OPERATION_ERRORS,
  UNMATCHED_ERRORS,
} from './openapi-catalogue';
import {
  jsonContent,
  type OwnAnswer,
  type ResponseOptions,
  responsesOf,
  schemaRef,
} from './openapi-responses';
import { SESSION_SECURITY_SCHEME, sessionPaths } from './openapi-sessions';
import { errorEnvelope, livenessAnswer, readinessAnswer, upstreamErrorAnswer } from './schemas';

export interface OpenApiOptions {
  /** Browser sessions are on: /bff/* and the session cookie scheme. */
  readonly sessions?: boolean;
  /** Local mode: every answer carries X-Upstream: simulator. */
  readonly localMode?: boolean;
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

/** The request headers every catalogue operation reads (X-CSRF with browser sessions on). */
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

/** Idempotency-Key on an operation that takes it (SPEC §13). */
function idempotencyKeyHeader(required: boolean): object {
  return {
    name: 'Idempotency-Key',
    in: 'header',
    required,
    description:
      'draft-ietf-httpapi-idempotency-key-header: 1–255 visible ASCII characters. The first request is forwarded once for the fleet; a repeat with the same body gets its answer with Idempotent-Replayed: true (docs/idempotency.md).',
    schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
  };
}

/** The OpenAPI Response objects of an operation as the catalogue documents them (its own answers). */
function ownAnswers(responses: unknown): Record<string, OwnAnswer> {
  const own: Record<string, OwnAnswer> = {};
  if (typeof responses !== 'object' || responses === null) return own;
  for (const [status, response] of Object.entries(responses as Record<string, Record<string, unknown>>)) {
    if (status === 'default' || typeof response !== 'object' || response === null) continue;
    own[status] = {
      description: typeof response.description === 'string' ? response.description : '',
      ...(response.content !== undefined && { content: response.content as object }),
    };
  }
  return own;
}

const METHOD_KEYS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** A strict operation's JSON answer when its response declares no schema: `{}` (answer-filter.ts). */
const NOTHING_DECLARED = { 'application/json': { schema: { type: 'object', maxProperties: 0 } } };

/**
 * The operation's own answers plus the successes the catalogue does not list (a 201 where only 200 is), as the answer
 * filter treats them (load-catalogue.ts, successSchemas): with no 2xx listed, `default` speaks for them (`2XX`);
 * otherwise, or where `default` declares no JSON schema either, a strict operation answers them with its status and the
 * JSON body `{}` (nothing of it is declared).
 */
function withUnlistedSuccesses(
  responses: unknown,
  own: Record<string, OwnAnswer>,
  answer: string,
): Record<string, OwnAnswer> {
  const statuses = Object.keys(own);
  if (statuses.some((status) => status.toUpperCase() === '2XX')) return own;
  const strict = answer === 'strict';
  const fallback = (responses as Record<string, unknown> | undefined)?.default;
  if (
    !statuses.some((status) => status.startsWith('2')) &&
    typeof fallback === 'object' &&
    fallback !== null
  ) {
    const { description, content } = fallback as { description?: unknown; content?: object };
    const filtered = strict && jsonSchemaOf(fallback as Record<string, unknown>) === null;
    const merged = filtered ? { ...content, ...NOTHING_DECLARED } : content;
    const text = typeof description === 'string' ? description : '';
    return { ...own, '2XX': { description: text, ...(merged !== undefined && { content: merged }) } };
  }
  if (!strict) return own;
  return {
    ...own,
    '2XX': {
      description:
        "A success the catalogue does not list: the provider's status, its JSON body as {} (nothing of it is declared).",
      content: NOTHING_DECLARED,
    },
  };
}

/**
 * The catalogue's operations as callers see them (SPEC §12): each as the document declares it, without x-gateway,
 * plus the gateway's request headers, its errors with their reasons, the provider's answers passed through, and
 * HEAD wherever GET answers it (the provider only ever sees the GET).
 */
function operationPaths(
  catalogue: Catalogue,
  options: ResponseOptions,
  sessions: boolean,
): Record<string, object> {
  const requestHeaders = operationRequestHeaders(sessions);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of catalogue.operations) {
    const item = catalogue.published.paths[operation.path] as Record<string, unknown>;
    paths[operation.path] ??= Object.fromEntries(
      Object.entries(item).filter(([key]) => !METHOD_KEYS.has(key)),
    );
    const declared = item[operation.method.toLowerCase()] as Record<string, unknown>;
    const keyed = operation.idempotency !== 'none';
    const parameters = [
      ...((declared.parameters as object[] | undefined) ?? []),
      ...requestHeaders,
      ...(keyed ? [idempotencyKeyHeader(operation.idempotency === 'required')] : []),
    ];
    const errors = [
      ...(operation.hasBody ? BODY_OPERATION_ERRORS : PARAMETER_OPERATION_ERRORS),
      ...(keyed ? IDEMPOTENCY_ERRORS : []),
    ];
    const responses = (head: boolean) =>
      responsesOf(
        {
          route: 'forwarded',
          answers: withUnlistedSuccesses(
            declared.responses,
            ownAnswers(declared.responses),
            operation.answer,
          ),
          errors,
          passThrough: true,
        },
        { ...options, head },
      );
    const summary = typeof declared.summary === 'string' ? declared.summary : operation.id;
    const described = { ...declared, summary: `${summary} (scope ${operation.scope})`, parameters };
    const entry = paths[operation.path] as Record<string, unknown>;
    entry[operation.method.toLowerCase()] = { ...described, responses: responses(false) };
    if (operation.method === 'GET')
      entry.head = {
        ...described,
        operationId: `head${operation.id.charAt(0).toUpperCase()}${operation.id.slice(1)}`,
        summary: `As GET ${operation.path}, without the body: answered from a GET answer (the provider only ever sees a GET).`,
        responses: responses(true),
      };
  }
  return paths;
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

/** Built once per catalogue (at start and on each reload), never per request. */
export function buildOpenApiDocument(
  version: string,
  catalogue: Catalogue,
  options: OpenApiOptions = {},
): object {
  const sessions = options.sessions === true;
  const answers: ResponseOptions = { localMode: options.localMode === true };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Payments BFF gateway',
      version,
      description:
        'Validated, sanitized access to the Payment Service API: the operations of the gateway’s catalogue. ' +
        'The gateway holds the upstream credentials and tokens; callers authenticate with an API key or an SSO token. ' +
        "Errors the gateway makes are ErrorEnvelope (with requestId); the provider's own answers pass through " +
        'unchanged as UpstreamError (no requestId). Any other path is components.responses.NotFound; a listed path ' +
        'with another method is components.responses.MethodNotAllowed.',
    },
    servers: [{ url: '/' }],
    security: [{ apiKey: [] }, { sso: [] }, ...(sessions ? [{ session: [] }] : [])],
    paths: {
      ...(sessions ? sessionPaths(answers) : {}),
      ...operationPaths(catalogue, answers, sessions),
      ...probePaths(answers),
    },
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        sso: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
        ...(sessions ? { session: SESSION_SECURITY_SCHEME } : {}),
      },
      ...withoutKeys(catalogue.published.components, ['schemas', 'responses', 'securitySchemes']),
      responses: {
        ...(catalogue.published.components.responses as object | undefined),
        ...unmatchedResponses(answers),
      },
      // The gateway's own schemas win over a catalogue schema of the same name (docs/catalogue.md).
      schemas: {
        ...(catalogue.published.components.schemas as object | undefined),
        ...componentSchemas({
          UpstreamError: upstreamErrorAnswer,
          ErrorEnvelope: errorEnvelope,
          Liveness: livenessAnswer,
          Readiness: readinessAnswer,
        }),
      },
    },
  };
}

function withoutKeys(object: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(object).filter(([key]) => !keys.includes(key)));
}
