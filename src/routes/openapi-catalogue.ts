// What the gateway answers, as data: the errors each route makes and the headers a client may read. /openapi.json is
// built from these lists (openapi.ts), so a new reason, status or header is one line here.
import { ACCOUNT_ID_PATTERN } from '../config/account-spec';
import { type ErrorReason, REASON_STATUS } from '../http/gateway-error';
import { PROTOCOL_REFUSALS, type ProtocolReason } from '../http/protocol-errors';

/** A gateway-made error a route can answer: its reason, its status (the reason's own unless overridden), and when. */
export interface ErrorCase {
  readonly reason: ErrorReason | ProtocolReason;
  readonly status: number;
  readonly when: string;
}

const error = (reason: ErrorReason, when: string, status: number = REASON_STATUS[reason]): ErrorCase => ({
  reason,
  status,
  when,
});

/** What every route can answer before its own handler runs: the inbound guards, and a gateway bug. */
export const EVERY_ROUTE_ERRORS: readonly ErrorCase[] = [
  error('CLIENT_FORBIDDEN', 'caller outside INBOUND_ALLOW_CIDRS, or a browser origin CORS does not allow'),
  error('INTERNAL_ERROR', 'a bug in the gateway (logged with the request id)'),
];

/**
 * What the gateway refuses before any route runs (src/http/protocol-errors.ts): what Node's HTTP parser refuses (a
 * request that is not HTTP, its headers too large, a request that did not arrive in time, an unknown Expect) and an
 * HTTP/1.1 request without Host (or with several, or an invalid one). Any request can get one, so every operation of the document lists them (responsesOf).
 */
export const PROTOCOL_ERRORS: readonly ErrorCase[] = [
  ...PROTOCOL_REFUSALS.map((refusal) => ({
    reason: refusal.reason,
    status: refusal.status,
    when: `${refusal.detail.replace(/\.$/, '')} (refused before any route runs; the connection closes)`,
  })),
  error(
    'INVALID_REQUEST',
    'an HTTP/1.1 request without Host, or one with several Host headers or an invalid one (refused before any route runs; the connection closes)',
  ),
];

/** The errors of every catalogue operation, whatever its input. */
export const FORWARDED_ERRORS: readonly ErrorCase[] = [
  ...EVERY_ROUTE_ERRORS,
  error('CLIENT_UNAUTHENTICATED', 'no, unknown or invalid API key, SSO token or session'),
  error('CLIENT_FORBIDDEN', "the caller's scopes lack the route's scope"),
  error(
    'CLIENT_FORBIDDEN',
    'X-Upstream-Account names an account the client may not use (unknown ids get the same answer)',
  ),
  error('INVALID_REQUEST', 'X-Upstream-Account is not one account id; nothing reached the provider'),
  error(
    'UPSTREAM_UNAVAILABLE',
    "the client's provider account is no longer configured (the detail names it); never another account",
    503,
  ),
  error(
    'RATE_LIMITED',
    "the client's limit is spent, or its address is blocked after failed authentications",
  ),
  error(
    'UPSTREAM_AUTH_FAILED',
    "the provider refused the gateway's credentials (Retry-After while backing off)",
  ),
  error('UPSTREAM_IP_NOT_WHITELISTED', "the provider refused the gateway's egress IP (its 403)"),
  error(
    'UPSTREAM_UNAVAILABLE',
    'provider 5xx, connection or TLS error, a provider redirect (3xx), or a provider 4xx that is not JSON',
  ),
  error(
    'UPSTREAM_UNAVAILABLE',
    "the operation's circuit is open; answered without calling (Retry-After)",
    503,
  ),
  error(
    'UPSTREAM_SATURATED',
    'every upstream socket stayed busy for UPSTREAM_QUEUE_TIMEOUT_MS (Retry-After)',
  ),
  error('UPSTREAM_TIMEOUT', 'no answer within UPSTREAM_TIMEOUT_MS'),
  error('UPSTREAM_BUDGET_EXHAUSTED', "the account's provider budget had no room (Retry-After); never sent"),
  error('UPSTREAM_RATE_LIMITED', 'the provider paused the account with a 429 and Retry-After (Retry-After)'),
  error('QUOTA_EXCEEDED', "the client's day or month quota on this account is used (Retry-After)"),
];

/** A catalogue operation with a JSON body. */
export const BODY_OPERATION_ERRORS: readonly ErrorCase[] = [
  error(
    'INVALID_REQUEST',
    "the body or a parameter fails the operation's schema, or the body is not JSON; nothing reached the provider",
  ),
  error('PAYLOAD_TOO_LARGE', 'the body is over BODY_LIMIT_BYTES'),
  error('UNSUPPORTED_MEDIA_TYPE', 'the body is not application/json'),
  ...FORWARDED_ERRORS,
];

/** A catalogue operation without a body (its parameters are validated). */
export const PARAMETER_OPERATION_ERRORS: readonly ErrorCase[] = [
  error(
    'INVALID_REQUEST',
    "a path or query parameter fails the operation's schema; nothing reached the provider",
  ),
  ...FORWARDED_ERRORS,
];

/** An operation that takes Idempotency-Key (x-gateway.idempotency `optional` or `required`; docs/idempotency.md). */
export const IDEMPOTENCY_ERRORS: readonly ErrorCase[] = [
  error(
    'INVALID_REQUEST',
    'the Idempotency-Key is malformed, or missing where required; nothing reached the provider',
  ),
  error(
    'IDEMPOTENCY_KEY_IN_USE',
    'a request with this Idempotency-Key is still being answered (Retry-After)',
  ),
  error('IDEMPOTENCY_KEY_REUSED', 'this Idempotency-Key was used with another method, path or body'),
  error(
    'IDEMPOTENCY_UNAVAILABLE',
    'the store of Idempotency-Keys cannot be reached (Retry-After); send again, or without a key',
  ),
  error(
    'UPSTREAM_OUTCOME_UNKNOWN',
    'the keyed request reached the provider and its answer was lost; never sent again under this key',
  ),
];

/** Any path no route takes, and a listed path with a method it does not list (components.responses). */
export const UNMATCHED_ERRORS: readonly ErrorCase[] = [
  error('NOT_FOUND', 'any path this document does not list'),
  error('METHOD_NOT_ALLOWED', 'a listed path with a method it does not list (Allow names the right ones)'),
];

/**
 * Statuses the provider's own answers pass through with, body and status unchanged (an upstream 401 and 403 never
 * pass: they become UPSTREAM_AUTH_FAILED and UPSTREAM_IP_NOT_WHITELISTED; 5xx become UPSTREAM_UNAVAILABLE). 4XX
 * stands for any other 4xx the provider may choose.
 */
export const PASS_THROUGH_STATUSES: readonly string[] = ['400', '404', '429', '4XX'];

/** Which answer a header rule is asked about. */
export interface AnswerKind {
  /** forwarded: the two operations; probe: health, readiness, metrics, this document; session: /bff/*. */
  readonly route: 'forwarded' | 'probe' | 'session' | 'unmatched';
  /** The response key: '200', '4XX', ... */
  readonly status: string;
  /** The answer may be the provider's, passed through. */
  readonly passThrough: boolean;
  /** Local mode: the upstream is the bundled simulator. */
  readonly localMode: boolean;
}

export interface HeaderRule {
  readonly description: string;
  readonly schema: object;
  /** Whether an answer of this kind carries the header: always, sometimes, or never (undefined). */
  on(answer: AnswerKind): 'required' | 'optional' | undefined;
}

const always = () => 'required' as const;
const limited = (a: AnswerKind) =>
  a.route === 'forwarded' || a.route === 'session' ? 'optional' : undefined;
const RETRY_STATUSES = new Set(['409', '429', '502', '503']);

/** Every answer header a client may read, and which answers carry it. */
export const RESPONSE_HEADERS: Readonly<Record<string, HeaderRule>> = {
  'X-Request-Id': {
    description: 'The id of this exchange: the caller’s well-formed X-Request-Id, or one the gateway made.',
    schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
    on: always,
  },
  'Cache-Control': {
    description: 'Every answer: no cache may keep it (upstream caching headers never pass).',
    schema: { type: 'string', const: 'no-store' },
    on: always,
  },
  'X-Upstream-Account': {
    description: 'The provider account the request used: the caller’s default, or the one it asked for.',
    schema: { type: 'string', pattern: ACCOUNT_ID_PATTERN.source },
    on: (a) => (a.route === 'forwarded' ? 'optional' : undefined),
  },
  'X-Upstream': {
    description: 'Local mode only: the answer came from the bundled simulator, not the provider.',
    schema: { type: 'string', const: 'simulator' },
    on: (a) => (a.localMode ? 'required' : undefined),
  },
  RateLimit: {
    description: "The client's limit (IETF draft 7): limit, remaining and reset in seconds.",
    schema: { type: 'string', pattern: '^limit=\\d+, remaining=\\d+, reset=\\d+$' },
    on: limited,
  },
  'RateLimit-Policy': {
    description: "The client's limit policy (IETF draft 7): the limit and its window in seconds.",
    schema: { type: 'string', pattern: '^\\d+;w=\\d+$' },
    on: limited,
  },
  'Retry-After': {
    description:
      "Whole seconds to wait: the gateway's own, or the provider's (an HTTP date becomes the seconds left; at most UPSTREAM_RETRY_AFTER_MAX_SECONDS).",
    schema: { type: 'string', pattern: '^[0-9]+$' },
    on: (a) => (RETRY_STATUSES.has(a.status) || a.passThrough ? 'optional' : undefined),
  },
  'Idempotent-Replayed': {
    description:
      'true: the answer kept for this Idempotency-Key, repeated byte for byte without a provider call (operations that take the key).',
    schema: { type: 'string', const: 'true' },
    on: (a) => (a.route === 'forwarded' ? 'optional' : undefined),
  },
  'Content-Language': {
    description: "The provider's, passed through.",
    schema: { type: 'string' },
    on: (a) => (a.route === 'forwarded' && (a.passThrough || a.status === '200') ? 'optional' : undefined),
  },
  'Content-Disposition': {
    description: "The provider's, passed through: the file name of an export.",
    schema: { type: 'string' },
    on: (a) => (a.route === 'forwarded' && (a.passThrough || a.status === '200') ? 'optional' : undefined),
  },
  Allow: {
    description: 'The methods the path takes.',
    schema: { type: 'string', pattern: '^[A-Z]+(, [A-Z]+)*$' },
    on: (a) => (a.status === '405' ? 'required' : undefined),
  },
  Link: {
    description: 'A browser session that ended: where to log in again, </bff/login>; rel="login".',
    schema: { type: 'string', const: '</bff/login>; rel="login"' },
    on: (a) => (a.route !== 'probe' && a.status === '401' ? 'optional' : undefined),
  },
  Location: {
    description: 'Where the browser goes next.',
    schema: { type: 'string', minLength: 1 },
    on: (a) => (a.status === '303' ? 'required' : undefined),
  },
};
