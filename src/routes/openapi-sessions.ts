// The /bff/* paths of browser sessions in the OpenAPI document (present only when sessions are on).
import { type ErrorReason, REASON_STATUS } from '../http/gateway-error';
import { type ErrorCase, EVERY_ROUTE_ERRORS } from './openapi-catalogue';
import { jsonContent, type OwnAnswer, type ResponseOptions, responsesOf } from './openapi-responses';

const failure = (reason: ErrorReason, when: string, status: number = REASON_STATUS[reason]): ErrorCase => ({
  reason,
  status,
  when,
});
const limited = failure('RATE_LIMITED', 'too many /bff/* calls from this address');
const storeDown = failure(
  'UPSTREAM_UNAVAILABLE',
  'the identity provider or the session store cannot be reached (Retry-After)',
  503,
);
const crossSite = failure('CLIENT_FORBIDDEN', 'no X-CSRF: 1, or not from this origin');

/**
 * What safeReturnTo (src/sessions/return-to.ts) accepts, as far as a pattern can say it: one leading `/` not followed
 * by `/`, `\` or their percent-encodings (no `//host`), and no control character, space or backslash. The gateway
 * also refuses what only decoding reveals (`%252F%252F`, encoded controls) and /bff/* itself: those get its 400.
 */
export const RETURN_TO_PATTERN = '^/(?![/\\\\]|%2[fF]|%5[cC])[^\\u0000-\\u0020\\u007f-\\u009f\\\\]*$';

/** Express's short redirect note, in the type the browser accepts: nobody needs to read it. */
const redirectNote = {
  'text/plain': { schema: { type: 'string' } },
  'text/html': { schema: { type: 'string' } },
};

const sessionResponses = (
  answers: Record<string, OwnAnswer>,
  errors: ErrorCase[],
  options: ResponseOptions,
) => responsesOf({ route: 'session', answers, errors: [...EVERY_ROUTE_ERRORS, limited, ...errors] }, options);
const csrfHeader = {
  name: 'X-CSRF',
  in: 'header',
  required: true,
  description: 'Must be 1: a custom header a cross-site form cannot send.',
  schema: { type: 'string', const: '1' },
};

/** The cookie the gateway sets at login: what a page's calls authenticate with (never readable by script). */
export const SESSION_SECURITY_SCHEME = {
  type: 'apiKey',
  in: 'cookie',
  name: '__Host-bff-session',
  description:
    'Browser session (same-origin pages only): every call also sends X-CSRF: 1, and Origin and Sec-Fetch-Site, when the browser sends them, must be this origin.',
};

/** The /bff/* path items; `options.localMode` adds X-Upstream to every answer. */
export function sessionPaths(options: ResponseOptions): Record<string, object> {
  const loginResponses = (head: boolean) =>
    sessionResponses(
      {
        '303': {
          description: 'To the provider; sets the __Host-bff-login cookie binding the login to this browser.',
          content: redirectNote,
        },
      },
      [failure('INVALID_REQUEST', 'returnTo leads off this origin or back into /bff/'), storeDown],
      { ...options, head },
    );
  const returnTo = {
    name: 'returnTo',
    in: 'query',
    required: false,
    description:
      'A path on this origin to return to after the login (default /): one leading /, never //host, /\\host, a scheme or /bff/*.',
    schema: { type: 'string', maxLength: 2048, pattern: RETURN_TO_PATTERN },
  };
  /** What the provider sends back (and an error instead of a code); the gateway reads state and the rest. */
  const callbackParameters = ['state', 'code', 'iss', 'session_state', 'error', 'error_description'].map(
    (name) => ({
      name,
      in: 'query',
      required: false,
      schema: { type: 'string' },
    }),
  );
  const userAnswer: OwnAnswer = {
    description: 'The signed-in user.',
    content: jsonContent({
      type: 'object',
      required: ['name', 'email', 'scopes', 'expiresAt'],
      properties: {
        name: { type: ['string', 'null'] },
        email: { type: ['string', 'null'] },
        scopes: { type: 'array', items: { type: 'string' } },
        expiresAt: { type: 'string', format: 'date-time' },
      },
    }),
  };
  const userResponses = (head: boolean) =>
    sessionResponses(
      { '200': userAnswer },
      [
        failure('CLIENT_UNAUTHENTICATED', 'no session, or it ended (Link: </bff/login>; rel="login")'),
        crossSite,
        failure('UPSTREAM_UNAVAILABLE', 'the session store cannot be reached (Retry-After)', 503),
      ],
      { ...options, head },
    );
  return {
    '/bff/login': {
      get: {
        operationId: 'sessionLogin',
        security: [],
        summary: 'Start a login at the identity provider (authorization code + PKCE); 303 to the provider.',
        parameters: [returnTo],
        responses: loginResponses(false),
      },
      head: {
        operationId: 'headSessionLogin',
        security: [],
        summary: 'As GET (it starts a login too), without a body.',
        parameters: [returnTo],
        responses: loginResponses(true),
      },
    },
    '/bff/callback': {
      get: {
        operationId: 'sessionCallback',
        security: [],
        summary:
          "The provider's redirect back: finishes the login once; 303 to returnTo with the session cookie.",
        parameters: callbackParameters,
        responses: sessionResponses(
          {
            '303': {
              description: 'Logged in: sets __Host-bff-session (Secure, HttpOnly, SameSite=Strict, Path=/).',
            },
          },
          [
            failure('INVALID_REQUEST', 'unknown, used, expired or foreign login, or the provider refused it'),
            storeDown,
          ],
          options,
        ),
      },
      head: {
        operationId: 'headSessionCallback',
        security: [],
        summary: 'Refused: a HEAD (a link checker, a prefetch) must not spend the login.',
        parameters: callbackParameters,
        responses: sessionResponses({}, [failure('METHOD_NOT_ALLOWED', 'only GET finishes a login')], {
          ...options,
          head: true,
        }),
      },
    },
    '/bff/user': {
      get: {
        operationId: 'sessionUser',
        security: [{ session: [] }],
        summary: 'The signed-in user: name, email, gateway scopes and when the session ends; never a token.',
        parameters: [csrfHeader],
        responses: userResponses(false),
      },
      head: {
        operationId: 'headSessionUser',
        security: [{ session: [] }],
        summary: 'As GET, without a body.',
        parameters: [csrfHeader],
        responses: userResponses(true),
      },
    },
    '/bff/logout': {
      post: {
        operationId: 'sessionLogout',
        security: [{ session: [] }],
        summary:
          "End the session on every replica; the provider's end-session URL to send the browser to, if any.",
        parameters: [csrfHeader],
        responses: sessionResponses(
          {
            '200': {
              description: 'Logged out; the cookie is cleared.',
              content: jsonContent({
                type: 'object',
                required: ['loggedOut', 'endSessionUrl', 'endSessionForm'],
                properties: {
                  loggedOut: { type: 'boolean', const: true },
                  endSessionUrl: {
                    description:
                      "The provider's end-session URL to send the browser to; with SESSION_END_SESSION_METHOD=get (the default) it carries the session's ID token as id_token_hint. Null without an end-session endpoint.",
                    type: ['string', 'null'],
                    format: 'uri',
                  },
                  endSessionForm: {
                    description:
                      "With SESSION_END_SESSION_METHOD=post: the form to POST to the provider's end-session endpoint (a top-level form submission, so the provider sees its own cookie), its fields carrying the session's ID token as id_token_hint, never in a URL. Null with get (the default), without an ID token or an end-session endpoint.",
                    oneOf: [
                      { type: 'null' },
                      {
                        type: 'object',
                        required: ['action', 'fields'],
                        properties: {
                          action: { type: 'string', format: 'uri' },
                          fields: { type: 'object', additionalProperties: { type: 'string' } },
                        },
                      },
                    ],
                  },
                },
              }),
            },
          },
          [
            crossSite,
            failure('UPSTREAM_UNAVAILABLE', 'the session store cannot be reached (Retry-After)', 503),
          ],
          options,
        ),
      },
    },
    '/bff/backchannel-logout': {
      post: {
        operationId: 'sessionBackchannelLogout',
        security: [],
        summary:
          "OpenID Connect Back-Channel Logout: the provider's signed logout token ends the matching sessions.",
        requestBody: {
          required: true,
          content: {
            'application/x-www-form-urlencoded': {
              schema: {
                type: 'object',
                required: ['logout_token'],
                properties: { logout_token: { type: 'string', minLength: 1, maxLength: 16_383 } },
              },
            },
          },
        },
        responses: sessionResponses(
          {
            '200': {
              description: 'How many sessions ended.',
              content: jsonContent({
                type: 'object',
                required: ['ended'],
                properties: { ended: { type: 'integer', minimum: 0 } },
              }),
            },
          },
          [
            failure('INVALID_REQUEST', 'missing, invalid or already used logout token'),
            failure('PAYLOAD_TOO_LARGE', 'the body is over 16 KiB'),
            failure('UPSTREAM_UNAVAILABLE', 'the session store cannot be reached (Retry-After)', 503),
          ],
          options,
        ),
      },
    },
  };
}
