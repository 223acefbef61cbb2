// The relying party against a provider that bends the rules, a real HTTP server on loopback counting what it is
// asked: discovery while it is down, a refresh refused with a bare 400, client_secret_post only, and an end-session
// endpoint that ends nothing without id_token_hint.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GatewayError } from '../../../src/http/gateway-error';
import {
  type ClientAuthMethod,
  createRelyingParty,
  RefreshRefused,
  type RelyingParty,
} from '../../../src/sessions/relying-party';

jest.setTimeout(30_000);

const CLIENT_ID = 'web-app-with-dashes';
const CLIENT_SECRET = 'secret-with-dashes';

interface StandIn {
  issuer: string;
  /** Discovery requests that reached the server. */
  discoveries: number;
  down: boolean;
  authMethods: string[];
  /** supported token endpoint authentication methods announced in discovery (undefined: the field is absent). */
  authMethodsSupported?: string[];
  refreshAnswer: (res: ServerResponse) => void;
  endedWithHint: string[];
}

let server: Server;
const provider: StandIn = {
  issuer: '',
  discoveries: 0,
  down: false,
  authMethods: [],
  refreshAnswer: (res) => res.writeHead(400).end(),
  endedWithHint: [],
};

function body(req: IncomingMessage): Promise<URLSearchParams> {
  return new Promise((resolve) => {
    let text = '';
    req.on('data', (chunk) => {
      text += chunk;
    });
    req.on('end', () => resolve(new URLSearchParams(text)));
  });
}

async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', provider.issuer);
  if (url.pathname === '/.well-known/openid-configuration') {
    provider.discoveries += 1;
    if (provider.down) return void res.writeHead(503).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        issuer: provider.issuer,
        authorization_endpoint: `${provider.issuer}/auth`,
        token_endpoint: `${provider.issuer}/token`,
        jwks_uri: `${provider.issuer}/jwks`,
        end_session_endpoint: `${provider.issuer}/session/end`,
        response_types_supported: ['code'],
        ...(provider.authMethodsSupported
          ? { token_endpoint_auth_methods_supported: provider.authMethodsSupported }
          : {}),
      }),
    );
    return;
  }
  const form = await body(req);
  if (url.pathname === '/token') {
    // What a strict client_secret_post provider checks: the secret in the body, no Authorization header.
    provider.authMethods.push(
      req.headers.authorization?.startsWith('Basic ')
        ? 'client_secret_basic'
        : form.get('client_secret') === CLIENT_SECRET && form.get('client_id') === CLIENT_ID
          ? 'client_secret_post'
          : 'none',
    );
    return provider.refreshAnswer(res);
  }
  if (url.pathname === '/session/end') {
    // A provider that ends its own session only when told whose: id_token_hint, or a 400.
    const hint = req.method === 'POST' ? form.get('id_token_hint') : url.searchParams.get('id_token_hint');
    if (!hint) return void res.writeHead(400).end('id_token_hint required');
    provider.endedWithHint.push(hint);
    return void res.writeHead(200).end('signed out');
  }
  res.writeHead(404).end();
}

beforeAll(async () => {
  server = createServer((req, res) => void answer(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  provider.issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
});

function relyingParty(
  options: { memoryMs?: number; clientAuthMethod?: ClientAuthMethod; endSessionMethod?: 'get' | 'post' } = {},
): RelyingParty {
  return createRelyingParty(
    {
      issuer: provider.issuer,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      publicOrigin: 'http://127.0.0.1:1',
      scopes: 'openid',
      clientAuthMethod: options.clientAuthMethod,
      endSessionMethod: options.endSessionMethod,
    },
    { allowHttp: true, lockTtlMs: 15_000, discoveryFailureMemoryMs: options.memoryMs ?? 60_000 },
  );
}

const CHECKS = { state: 's', nonce: 'n', codeVerifier: 'v'.repeat(43) };

describe('an issuer that is down for a burst of logins', () => {
  afterEach(() => {
    provider.down = false;
  });

  test('costs it one discovery, not one per login; each login still gets its 502 answer', async () => {
    provider.down = true;
    provider.discoveries = 0;
    const rp = relyingParty();
    const concurrent = await Promise.allSettled(
      Array.from({ length: 20 }, () => rp.authorizationUrl(CHECKS)),
    );
    const sequential: PromiseSettledResult<URL>[] = [];
    for (let i = 0; i < 20; i += 1)
      sequential.push(...(await Promise.allSettled([rp.authorizationUrl(CHECKS)])));
    expect(provider.discoveries).toBe(1);
    for (const result of [...concurrent, ...sequential]) {
      expect(result.status).toBe('rejected');
      const reason = (result as PromiseRejectedResult).reason as GatewayError;
      expect(reason).toBeInstanceOf(GatewayError);
      expect([reason.reason, reason.status]).toEqual(['UPSTREAM_UNAVAILABLE', 502]);
    }
  });

  test('asks again once the memory of the failure has expired, and logs in when the issuer is back', async () => {
    provider.down = true;
    provider.discoveries = 0;
    const rp = relyingParty({ memoryMs: 300 });
    await expect(rp.authorizationUrl(CHECKS)).rejects.toThrow(GatewayError);
    await expect(rp.authorizationUrl(CHECKS)).rejects.toThrow(GatewayError);
    expect(provider.discoveries).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 350));
    provider.down = false;
    expect((await rp.authorizationUrl(CHECKS)).href).toMatch(/\/auth\?/);
    expect(provider.discoveries).toBe(2);
  });
});

describe('a refresh the token endpoint refuses', () => {
  const refusals: [string, (res: ServerResponse) => void][] = [
    ['a bare 400 with no body', (res) => res.writeHead(400).end()],
    [
      'a 400 with an HTML page',
      (res) => res.writeHead(400, { 'content-type': 'text/html' }).end('<h1>Bad</h1>'),
    ],
    [
      'a 401 invalid_client',
      (res) =>
        res
          .writeHead(401, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: 'invalid_client' })),
    ],
    ['a bare 403', (res) => res.writeHead(403).end()],
    [
      'a 400 invalid_grant',
      (res) =>
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: 'invalid_grant' })),
    ],
  ];
  test.each(refusals)('%s ends the session (RefreshRefused)', async (_name, refuse) => {
    provider.refreshAnswer = refuse;
    await expect(relyingParty().refresh('refresh-token')).rejects.toBeInstanceOf(RefreshRefused);
  });

  const outages: [string, (res: ServerResponse) => void][] = [
    ['a bare 503', (res) => res.writeHead(503).end()],
    ['a bare 429 (later, not no)', (res) => res.writeHead(429).end()],
    [
      'a 500 with an OAuth error body',
      (res) =>
        res
          .writeHead(500, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: 'temporarily_unavailable' })),
    ],
    ['a dropped connection', (res) => res.socket?.destroy()],
  ];
  test.each(outages)('%s is an outage: the session stays', async (_name, fail) => {
    provider.refreshAnswer = fail;
    const error = await relyingParty()
      .refresh('refresh-token')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(RefreshRefused);
  });
});

describe("the client's authentication at the token endpoint", () => {
  beforeEach(() => {
    provider.authMethods = [];
    provider.refreshAnswer = (res) => res.writeHead(400).end();
  });
  afterAll(() => {
    provider.authMethodsSupported = undefined;
  });

  test.each([
    [['client_secret_post'], undefined, 'client_secret_post'],
    [['client_secret_basic', 'client_secret_post'], undefined, 'client_secret_basic'],
    [undefined, undefined, 'client_secret_basic'],
    [['client_secret_basic', 'client_secret_post'], 'client_secret_post', 'client_secret_post'],
    [['client_secret_post'], 'client_secret_basic', 'client_secret_basic'],
  ] as const)(
    'provider supports %j, SESSION_CLIENT_AUTH_METHOD=%s: sends %s',
    async (supported, configured, sent) => {
      provider.authMethodsSupported = supported ? [...supported] : undefined;
      await relyingParty({ clientAuthMethod: configured })
        .refresh('refresh-token')
        .catch(() => undefined);
      expect(provider.authMethods).toEqual([sent]);
    },
  );
});

describe('logout at a provider that needs id_token_hint', () => {
  const idToken = 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.';

  test('get (the default): the link carries the ID token and following it ends the provider session; no form', async () => {
    provider.endedWithHint = [];
    const end = await relyingParty().endSession(idToken);
    expect(end?.form).toBeUndefined();
    expect(end?.url.searchParams.get('id_token_hint')).toBe(idToken);
    expect(end?.url.searchParams.get('client_id')).toBe(CLIENT_ID);
    expect(end?.url.searchParams.get('post_logout_redirect_uri')).toBe('http://127.0.0.1:1/');
    expect((await fetch(end?.url ?? '')).status).toBe(200);
    expect(provider.endedWithHint).toEqual([idToken]);
  });

  test('post: the form carries the ID token in its body and the provider ends its session; the link carries none', async () => {
    provider.endedWithHint = [];
    const end = await relyingParty({ endSessionMethod: 'post' }).endSession(idToken);
    expect(end?.url.href).not.toContain('id_token_hint');
    expect(end?.url.href).not.toContain(idToken);
    expect(end?.form?.action).toBe(`${provider.issuer}/session/end`);
    // What the browser does with the form: a POST of its fields (application/x-www-form-urlencoded).
    const posted = await fetch(end?.form?.action ?? '', {
      method: 'POST',
      body: new URLSearchParams(end?.form?.fields),
    });
    expect(posted.status).toBe(200);
    expect(provider.endedWithHint).toEqual([idToken]);
    // The link alone (no hint): this provider keeps its session.
    expect((await fetch(end?.url ?? '')).status).toBe(400);
  });

  test.each(['get', 'post'] as const)(
    '%s without an ID token (a session from before ID tokens were kept): no form, the link with the client id only',
    async (endSessionMethod) => {
      const end = await relyingParty({ endSessionMethod }).endSession(undefined);
      expect(end?.form).toBeUndefined();
      expect(end?.url.searchParams.get('client_id')).toBe(CLIENT_ID);
      expect(end?.url.searchParams.has('id_token_hint')).toBe(false);
    },
  );
});
