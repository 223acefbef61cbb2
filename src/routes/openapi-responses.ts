// Builds an operation's OpenAPI responses from the catalogue: its own answers, the gateway's errors with their reasons,
// the provider's answers passed through, and on each the headers a client may read.
import {
  type AnswerKind,
  type ErrorCase,
  PASS_THROUGH_STATUSES,
  PROTOCOL_ERRORS,
  RESPONSE_HEADERS,
} from './openapi-catalogue';

export const schemaRef = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const jsonContent = (schema: object) => ({ 'application/json': { schema } });

/** A response an operation makes itself (not an error): its description and content, if it has a body. */
export interface OwnAnswer {
  readonly description: string;
  readonly content?: object;
}

export interface ResponsesSpec {
  readonly route: AnswerKind['route'];
  readonly answers?: Readonly<Record<string, OwnAnswer>>;
  readonly errors: readonly ErrorCase[];
  /** The provider's own answers pass through (PASS_THROUGH_STATUSES). */
  readonly passThrough?: boolean;
}

export interface ResponseOptions {
  readonly localMode: boolean;
  /** HEAD: the same answers without their bodies. */
  readonly head?: boolean;
}

/** The gateway's envelope, narrowed to the reasons it carries at one status. */
export function envelopeOf(reasons: readonly string[]): object {
  return {
    allOf: [
      schemaRef('ErrorEnvelope'),
      {
        type: 'object',
        properties: {
          status: { type: 'object', properties: { description: { type: 'string', enum: [...reasons] } } },
        },
      },
    ],
  };
}

/** The headers of an answer of `kind`, from RESPONSE_HEADERS. */
export function headersOf(kind: AnswerKind): Record<string, object> | undefined {
  const headers: Record<string, object> = {};
  for (const [name, rule] of Object.entries(RESPONSE_HEADERS)) {
    const presence = rule.on(kind);
    if (presence)
      headers[name] = {
        description: rule.description,
        required: presence === 'required',
        schema: rule.schema,
      };
  }
  return Object.keys(headers).length > 0 ? headers : undefined;
}

/** One schema, or anyOf several. */
const oneOf = (schemas: readonly object[]): object =>
  schemas.length === 1 ? schemas[0]! : { anyOf: [...schemas] };

/**
 * A status the catalogue describes itself (its own 400 or 409, say) that the gateway's errors, or the provider's
 * answers passed through, share: its JSON answer may be any of them.
 */
function withGatewayBodies(content: object, bodies: readonly object[]): object {
  if (bodies.length === 0) return content;
  const json = (content as Record<string, { schema?: object } | undefined>)['application/json'];
  const schema = json?.schema ? { anyOf: [json.schema, ...bodies] } : oneOf(bodies);
  return { ...content, 'application/json': { ...json, schema } };
}

/**
 * Whether a provider answer with `status` passes through on an operation that passes them: any 4xx but 401 and 403
 * (they become UPSTREAM_AUTH_FAILED and UPSTREAM_IP_NOT_WHITELISTED). A status listed for the gateway's own reasons
 * (409, 413, 431, ...) is then either body.
 */
function providerMayPass(status: string): boolean {
  return /^4\d\d$/.test(status) && status !== '401' && status !== '403';
}

/** Status keys in reading order: 200 < 303 < 400 < 4XX < 401 ... */
const byStatus = (a: string, b: string) =>
  a.replace('XX', '00').localeCompare(b.replace('XX', '00')) || a.localeCompare(b);

/** A route's answers; every list also carries the refusals of Node's HTTP parser (PROTOCOL_ERRORS). */
export function responsesOf(spec: ResponsesSpec, options: ResponseOptions): Record<string, object> {
  const reasonsAt = new Map<string, ErrorCase[]>();
  for (const failure of [...spec.errors, ...PROTOCOL_ERRORS]) {
    const key = String(failure.status);
    reasonsAt.set(key, [...(reasonsAt.get(key) ?? []), failure]);
  }
  const passThrough = new Set(spec.passThrough ? PASS_THROUGH_STATUSES : []);
  const statuses = new Set([...Object.keys(spec.answers ?? {}), ...reasonsAt.keys(), ...passThrough]);
  const responses: Record<string, object> = {};
  for (const status of [...statuses].sort(byStatus)) {
    const own = spec.answers?.[status];
    const failures = reasonsAt.get(status) ?? [];
    const upstream = passThrough.has(status) || (spec.passThrough === true && providerMayPass(status));
    const reasons = [...new Set(failures.map((f) => f.reason))];
    const lines = [
      ...(own ? [own.description] : []),
      ...failures.map((f) => `${f.reason}: ${f.when}.`),
      ...(upstream
        ? ["The provider's own answer, passed through unchanged (UpstreamError, no requestId)."]
        : []),
    ];
    const bodies = [
      ...(reasons.length > 0 ? [envelopeOf(reasons)] : []),
      ...(upstream ? [schemaRef('UpstreamError')] : []),
    ];
    const content = own?.content
      ? withGatewayBodies(own.content, bodies)
      : bodies.length === 0
        ? undefined
        : jsonContent(oneOf(bodies));
    const headers = headersOf({
      route: spec.route,
      status,
      passThrough: upstream,
      localMode: options.localMode,
    });
    responses[status] = {
      description: lines.join(' '),
      ...(headers && { headers }),
      ...(content && !options.head && { content }),
    };
  }
  return responses;
}
