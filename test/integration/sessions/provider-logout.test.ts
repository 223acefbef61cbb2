// Logout at the provider (RP-Initiated Logout 1.0) against the real development provider (oidc-provider), which takes
// GET only at its end-session endpoint, as its default does: after "log out", a new login must ask for the password.
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { type Answer, CookieJar, login, request } from '../../support/oidc-browser';

const ajax = { 'x-csrf': '1' };

interface LogoutAnswer {
  readonly endSessionUrl: string | null;
  readonly endSessionForm: { action: string; fields: Record<string, string> } | null;
}

/** What a web app does with the logout answer: submits the form when there is one, else follows the link. */
async function leaveAtProvider(jar: CookieJar, answer: LogoutAnswer): Promise<Answer> {
  if (answer.endSessionForm) {
    const { action, fields } = answer.endSessionForm;
    return request(jar, action, {
      method: 'POST',
      body: new URLSearchParams(fields).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
  }
  if (!answer.endSessionUrl) throw new Error('the logout named no end-session endpoint');
  return request(jar, answer.endSessionUrl);
}

/** The user confirms on the provider's logout page (oidc-provider asks): the form's POST with its xsrf value. */
async function confirmLogout(jar: CookieJar, page: Answer, pageUrl: string): Promise<Answer> {
  const action = /<form id="op\.logoutForm" method="post" action="([^"]+)"/.exec(page.body)?.[1];
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(page.body)?.[1];
  if (!action || !xsrf) throw new Error(`no logout form on the provider's page (${page.status})`);
  return request(jar, new URL(action, pageUrl).href, {
    method: 'POST',
    body: new URLSearchParams({ xsrf, logout: 'yes' }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
}

/** Starts a login and follows the provider's redirects: `password` when it shows its login page, else `silent`. */
async function nextLogin(jar: CookieJar, gatewayUrl: string): Promise<'password' | 'silent'> {
  let next = (await request(jar, `${gatewayUrl}/bff/login`)).location;
  for (let hop = 0; hop < 10 && next; hop++) {
    if (next.startsWith(`${gatewayUrl}/bff/callback`)) return 'silent';
    const answer = await request(jar, next);
    if (answer.status === 200 && /\/interaction\/[^/]+$/.test(next) && /name="password"/.test(answer.body))
      return 'password';
    next = answer.location;
  }
  throw new Error('the login neither asked for the password nor came back');
}

async function signedInThenLoggedOut(gateway: TestGateway) {
  const provider = gateway.gateway.identityProvider;
  if (!provider) throw new Error('local mode started no identity provider');
  const jar = new CookieJar();
  await login(jar, gateway.url, { username: provider.username, password: provider.password });
  // A second login while the provider's session lives needs no password: what logout must end.
  expect(await nextLogin(jar, gateway.url)).toBe('silent');
  const out = await request(jar, `${gateway.url}/bff/logout`, { method: 'POST', headers: ajax });
  expect(out.status).toBe(200);
  return { jar, answer: JSON.parse(out.body) as LogoutAnswer };
}

describe('logout at a provider that takes GET only at its end-session endpoint', () => {
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await startTestGateway({});
  });
  afterAll(() => gateway?.close());

  it('the logout link carries id_token_hint, client_id and post_logout_redirect_uri; no form', async () => {
    const { answer } = await signedInThenLoggedOut(gateway);
    expect(answer.endSessionForm).toBeNull();
    const url = new URL(answer.endSessionUrl ?? '');
    expect(url.searchParams.get('id_token_hint')).toMatch(/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(url.searchParams.get('client_id')).toBe('local-web-app');
    expect(url.searchParams.get('post_logout_redirect_uri')).toBe(`${gateway.url}/`);
  });

  it('after logout (the link followed, the logout confirmed at the provider) a new login asks for the password', async () => {
    const { jar, answer } = await signedInThenLoggedOut(gateway);
    const page = await leaveAtProvider(jar, answer);
    expect(page.status).toBe(200);
    const confirmed = await confirmLogout(jar, page, answer.endSessionUrl ?? '');
    // The provider sends the browser back to the gateway's origin (the registered post-logout redirect).
    expect(confirmed.location).toBe(`${gateway.url}/`);
    expect(await nextLogin(jar, gateway.url)).toBe('password');
  });
});

describe('SESSION_END_SESSION_METHOD=post at the same provider (why get is the default)', () => {
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await startTestGateway({ SESSION_END_SESSION_METHOD: 'post' });
  });
  afterAll(() => gateway?.close());

  it('the form POST is answered 404 and the provider session lives on: the next login needs no password', async () => {
    const { jar, answer } = await signedInThenLoggedOut(gateway);
    expect(new URL(answer.endSessionUrl ?? '').searchParams.has('id_token_hint')).toBe(false);
    expect(answer.endSessionForm?.fields.id_token_hint).toMatch(/^eyJ/);
    expect((await leaveAtProvider(jar, answer)).status).toBe(404);
    expect(await nextLogin(jar, gateway.url)).toBe('silent');
  });
});
