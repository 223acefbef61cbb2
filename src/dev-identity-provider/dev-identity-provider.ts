// A development OpenID provider on loopback (oidc-provider, a certified implementation): local mode and tests only.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider, { type Configuration, type KoaContextWithOIDC } from 'oidc-provider';

export interface DevUser {
  readonly username: string;
  readonly password: string;
  readonly sub: string;
  readonly name: string;
  readonly email: string;
  readonly groups: readonly string[];
}

export interface DevClient {
  readonly clientId: string;
  readonly clientSecret: string;
  /** The relying party's public origin: callback, post-logout page and back-channel logout live under it. */
  readonly origin: string;
  /** Where back-channel logout tokens are posted; default `<origin>/bff/backchannel-logout`. */
  readonly backchannelLogoutUri?: string;
}

export interface DevIdentityProviderOptions {
  readonly host?: string;
  readonly port?: number;
  readonly users: readonly DevUser[];
  readonly clients: readonly DevClient[];
  /** Hand out a new refresh token on every refresh, the old one spent at once (the strict setting). */
  readonly rotateRefreshTokens?: boolean;
  readonly accessTokenTtlSeconds?: number;
}

export interface DevIdentityProvider {
  readonly issuer: string;
  /** Successful refresh-token grants per grant (one grant per login): what revalidation costs the provider. */
  refreshesByGrant(): ReadonlyMap<string, number>;
  /** Refused refresh-token grants (a spent or revoked token presented). */
  refusedRefreshes(): number;
  /** Back-channel logout tokens the relying parties accepted, and those that failed. */
  backchannelDeliveries(): { readonly delivered: number; readonly failed: number };
  /** Revokes every grant of a user: the next refresh is refused. */
  revokeUser(sub: string): Promise<void>;
  close(): Promise<void>;
}

/** A development user with a fresh random password, printed by local mode's start-up banner. */
export function developmentUser(): DevUser {
  return {
    username: 'dev',
    password: randomBytes(9).toString('base64url'),
    sub: 'dev-user',
    name: 'Dev User',
    email: 'dev@example.test',
    groups: ['payments-ops'],
  };
}

export async function startDevIdentityProvider(
  options: DevIdentityProviderOptions,
): Promise<DevIdentityProvider> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const issuer = `http://${address}:${port}`;
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const signingKey = {
    ...(await exportJWK(privateKey)),
    kid: randomBytes(8).toString('hex'),
    alg: 'ES256',
    use: 'sig',
  };
  const users = new Map(options.users.map((user) => [user.sub, user]));
  const refreshes = new Map<string, number>();
  let refused = 0;
  const deliveries = { delivered: 0, failed: 0 };
  const grantsOf = new Map<string, Set<string>>();

  const configuration = providerConfiguration(options, signingKey, users, grantsOf);
  const provider = new Provider(issuer, configuration);
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    if (ctx.oidc.params?.grant_type !== 'refresh_token') return;
    const grantId = ctx.oidc.entities.RefreshToken?.grantId ?? 'unknown';
    refreshes.set(grantId, (refreshes.get(grantId) ?? 0) + 1);
  });
  provider.on('grant.error', (ctx: KoaContextWithOIDC) => {
    if (ctx.oidc.params?.grant_type === 'refresh_token') refused++;
  });
  provider.on('backchannel.success', () => deliveries.delivered++);
  provider.on('backchannel.error', () => deliveries.failed++);
  const providerHandler = provider.callback();

  server.on('request', (req, res) => {
    const match = /^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/.exec(req.url ?? '');
    if (!match) {
      providerHandler(req, res);
      return;
    }
    interaction(provider, users, req, res, Boolean(match[2])).catch(() => {
      if (!res.headersSent) res.writeHead(400, { 'content-type': 'text/html' });
      res.end(page('Error', '<p>This login is no longer valid: start again.</p>'));
    });
  });

  return {
    issuer,
    refreshesByGrant: () => refreshes,
    refusedRefreshes: () => refused,
    backchannelDeliveries: () => ({ ...deliveries }),
    async revokeUser(sub) {
      for (const grantId of grantsOf.get(sub) ?? []) {
        const grant = await provider.Grant.find(grantId);
        await grant?.destroy();
        await provider.RefreshToken.adapter.revokeByGrantId(grantId);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The login page: username and password of a development user. */
async function interaction(
  provider: Provider,
  users: ReadonlyMap<string, DevUser>,
  req: IncomingMessage,
  res: ServerResponse,
  submitted: boolean,
): Promise<void> {
  const details = await provider.interactionDetails(req, res);
  if (!submitted) {
    answerLoginForm(res, details.uid, false);
    return;
  }
  const form = new URLSearchParams(await readBody(req));
  const user = [...users.values()].find(
    (candidate) => candidate.username === form.get('username') && candidate.password === form.get('password'),
  );
  if (!user) {
    answerLoginForm(res, details.uid, true);
    return;
  }
  await provider.interactionFinished(
    req,
    res,
    { login: { accountId: user.sub } },
    { mergeWithLastSubmission: false },
  );
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > 4096) req.destroy(new Error('body too large'));
    });
    req.on('end', () => resolve(body));
    req.on('error', reject);
  });
}

function answerLoginForm(res: ServerResponse, uid: string, failed: boolean): void {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(loginForm(uid, failed));
}

function loginForm(uid: string, failed: boolean): string {
  return page(
    'Development login',
    `<h1>Development identity provider</h1>${failed ? '<p role="alert">Wrong username or password.</p>' : ''}
<form method="post" action="/interaction/${escapeHtml(uid)}/login">
<label>Username <input name="username" autocomplete="username" autofocus></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Log in</button></form>`,
  );
}

function page(title: string, body: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body>${body}</body></html>`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** oidc-provider's settings: the clients, keys, claims and lifetimes of the development provider. */
function providerConfiguration(
  options: DevIdentityProviderOptions,
  signingKey: JWK,
  users: ReadonlyMap<string, DevUser>,
  grantsOf: Map<string, Set<string>>,
): Configuration {
  return {
    clients: options.clients.map((client) => ({
      client_id: client.clientId,
      client_secret: client.clientSecret,
      redirect_uris: [`${client.origin}/bff/callback`],
      post_logout_redirect_uris: [`${client.origin}/`],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'ES256',
      backchannel_logout_uri: client.backchannelLogoutUri ?? `${client.origin}/bff/backchannel-logout`,
      backchannel_logout_session_required: true,
    })),
    jwks: { keys: [signingKey] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    claims: { openid: ['sub'], profile: ['name', 'groups'], email: ['email'] },
    // The claims the gateway maps to scopes travel in the ID token itself.
    conformIdTokenClaims: false,
    features: FEATURES,
    pkce: { required: () => true },
    rotateRefreshToken: options.rotateRefreshTokens ?? true,
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    ttl: {
      AccessToken: options.accessTokenTtlSeconds ?? 300,
      RefreshToken: 24 * 3600,
      IdToken: 3600,
      Session: 24 * 3600,
      Grant: 24 * 3600,
      Interaction: 600,
    },
    findAccount: async (_ctx, sub) => {
      const user = users.get(sub);
      if (!user) return undefined;
      return {
        accountId: sub,
        claims: async () => ({ sub, name: user.name, email: user.email, groups: [...user.groups] }),
      };
    },
    // A first-party development client: the grant is given without a consent page.
    loadExistingGrant: async (ctx: KoaContextWithOIDC) => {
      const { client, session } = ctx.oidc;
      if (!client || !session?.accountId) return undefined;
      const existing = session.grantIdFor(client.clientId);
      if (existing) return ctx.oidc.provider.Grant.find(existing);
      const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
      // What the client asked for (SESSION_SCOPES), as far as this provider knows the scopes: not a fixed set.
      grant.addOIDCScope([...ctx.oidc.requestParamOIDCScopes].join(' '));
      await grant.save();
      const grants = grantsOf.get(session.accountId) ?? new Set<string>();
      grants.add(grant.jti);
      grantsOf.set(session.accountId, grants);
      return grant;
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      ctx.body = page(
        'Error',
        `<p>${escapeHtml(String(out.error))}: ${escapeHtml(String(out.error_description ?? ''))}</p>`,
      );
    },
  };
}

/** Logins by the interaction pages below, logout at the provider, back-channel logout to the gateway. */
const FEATURES: Configuration['features'] = {
  devInteractions: { enabled: false },
  backchannelLogout: { enabled: true },
  rpInitiatedLogout: {
    enabled: true,
    logoutSource: async (ctx, form) => {
      ctx.body = page(
        'Log out',
        `${form}<p>Log out of the development provider?</p><button autofocus type="submit" form="op.logoutForm" name="logout" value="yes">Log out</button>`,
      );
    },
    postLogoutSuccessSource: async (ctx) => {
      ctx.body = page('Logged out', '<p>You are logged out.</p>');
    },
  },
};
