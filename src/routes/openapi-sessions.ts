// The /bff/* paths of browser sessions in the OpenAPI document (present only when sessions are on).

const envelope = { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } };
const refused = (description: string) => ({ description, content: envelope });
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

export const SESSION_PATHS = {
  '/bff/login': {
    get: {
      operationId: 'sessionLogin',
      security: [],
      summary: 'Start a login at the identity provider (authorization code + PKCE); 303 to the provider.',
      parameters: [
        {
          name: 'returnTo',
          in: 'query',
          required: false,
          description: 'A path on this origin to return to after the login (default /).',
          schema: { type: 'string', pattern: '^/', maxLength: 2048 },
        },
      ],
      responses: {
        '303': {
          description: 'To the provider; sets the __Host-bff-login cookie binding the login to this browser.',
        },
        '400': refused('INVALID_REQUEST: returnTo leads off this origin.'),
        '429': refused('RATE_LIMITED'),
        '503': refused('UPSTREAM_UNAVAILABLE: the provider or the session store cannot be reached.'),
      },
    },
  },
  '/bff/callback': {
    get: {
      operationId: 'sessionCallback',
      security: [],
      summary:
        "The provider's redirect back: finishes the login once; 303 to returnTo with the session cookie.",
      responses: {
        '303': {
          description: 'Logged in: sets __Host-bff-session (Secure, HttpOnly, SameSite=Strict, Path=/).',
        },
        '400': refused(
          'INVALID_REQUEST: unknown, used, expired or foreign login, or the provider refused it.',
        ),
        '405': refused('METHOD_NOT_ALLOWED: only GET finishes a login (a HEAD does not spend it).'),
        '503': refused('UPSTREAM_UNAVAILABLE'),
      },
    },
  },
  '/bff/user': {
    get: {
      operationId: 'sessionUser',
      security: [{ session: [] }],
      summary: 'The signed-in user: name, email, gateway scopes and when the session ends; never a token.',
      parameters: [csrfHeader],
      responses: {
        '200': {
          description: 'The user.',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['name', 'email', 'scopes', 'expiresAt'],
                properties: {
                  name: { type: ['string', 'null'] },
                  email: { type: ['string', 'null'] },
                  scopes: { type: 'array', items: { type: 'string' } },
                  expiresAt: { type: 'string', format: 'date-time' },
                },
              },
            },
          },
        },
        '401': refused('CLIENT_UNAUTHENTICATED: no session, or it ended (Link: </bff/login>; rel="login").'),
        '403': refused('CLIENT_FORBIDDEN: no X-CSRF: 1, or not from this origin.'),
        '503': refused('UPSTREAM_UNAVAILABLE: the session store cannot be reached (Retry-After).'),
      },
    },
  },
  '/bff/logout': {
    post: {
      operationId: 'sessionLogout',
      security: [{ session: [] }],
      summary:
        "End the session on every replica; the provider's end-session URL to send the browser to, if any.",
      parameters: [csrfHeader],
      responses: {
        '200': {
          description: 'Logged out; the cookie is cleared.',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['loggedOut', 'endSessionUrl', 'endSessionForm'],
                properties: {
                  loggedOut: { type: 'boolean', const: true },
                  endSessionUrl: { type: ['string', 'null'], format: 'uri' },
                  endSessionForm: {
                    description:
                      "The form to POST to the provider's end-session endpoint (a top-level form submission, so the provider sees its own cookie): its fields carry the session's ID token as id_token_hint, never in a URL. Null without an ID token or an end-session endpoint.",
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
              },
            },
          },
        },
        '403': refused('CLIENT_FORBIDDEN: no X-CSRF: 1, or not from this origin.'),
      },
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
              properties: { logout_token: { type: 'string', maxLength: 16_383 } },
            },
          },
        },
      },
      responses: {
        '200': {
          description: 'How many sessions ended.',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['ended'],
                properties: { ended: { type: 'integer', minimum: 0 } },
              },
            },
          },
        },
        '400': refused('INVALID_REQUEST: missing, invalid or already used logout token.'),
        '503': refused('UPSTREAM_UNAVAILABLE'),
      },
    },
  },
};
