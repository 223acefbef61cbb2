// A scripted browser for OIDC logins in tests: follows redirects by hand and keeps cookies per host.

export interface Answer {
  readonly status: number;
  readonly location?: string;
  readonly setCookies: readonly string[];
  readonly body: string;
  readonly headers: Headers;
}

/** Cookies by host (port included) and name; attributes are kept raw for the assertions. */
export class CookieJar {
  private readonly byHost = new Map<string, Map<string, string>>();
  readonly raw: string[] = [];

  store(url: string, setCookies: readonly string[]): void {
    const host = new URL(url).host;
    const cookies = this.byHost.get(host) ?? new Map<string, string>();
    for (const line of setCookies) {
      this.raw.push(line);
      const [pair, ...attributes] = line.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '';
      if (expired) cookies.delete(name);
      else cookies.set(name, value);
    }
    this.byHost.set(host, cookies);
  }

  header(url: string): string {
    const cookies = this.byHost.get(new URL(url).host) ?? new Map();
    return [...cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  get(url: string, name: string): string | undefined {
    return this.byHost.get(new URL(url).host)?.get(name);
  }

  set(url: string, name: string, value: string): void {
    const host = new URL(url).host;
    const cookies = this.byHost.get(host) ?? new Map<string, string>();
    cookies.set(name, value);
    this.byHost.set(host, cookies);
  }
}

export async function request(
  jar: CookieJar,
  url: string,
  init: { method?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const cookie = jar.header(url);
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    body: init.body,
    redirect: 'manual',
    headers: { ...(cookie ? { cookie } : {}), ...init.headers },
  });
  const setCookies = response.headers.getSetCookie();
  jar.store(url, setCookies);
  const location = response.headers.get('location') ?? undefined;
  return {
    status: response.status,
    location: location === undefined ? undefined : new URL(location, url).href,
    setCookies,
    body: await response.text(),
    headers: response.headers,
  };
}

export interface LoginSteps {
  /** The gateway's answer to /bff/login. */
  readonly start: Answer;
  /** The provider's redirect back to the gateway's callback (not yet followed). */
  readonly callbackUrl: string;
}

/** Starts a login at the gateway and signs in at the provider, stopping before the callback is visited. */
export async function loginUntilCallback(
  jar: CookieJar,
  gatewayUrl: string,
  user: { username: string; password: string },
  returnTo = '/',
): Promise<LoginSteps> {
  const start = await request(jar, `${gatewayUrl}/bff/login?returnTo=${encodeURIComponent(returnTo)}`);
  if (start.status !== 303 || !start.location)
    throw new Error(`login start answered ${start.status}: ${start.body}`);
  let next = start.location;
  for (let hop = 0; hop < 10; hop++) {
    const answer = await request(jar, next);
    if (answer.status === 200 && /\/interaction\/[^/]+$/.test(next)) {
      const form = new URLSearchParams({ username: user.username, password: user.password }).toString();
      const posted = await request(jar, `${next}/login`, {
        method: 'POST',
        body: form,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      if (!posted.location) throw new Error(`login form answered ${posted.status}: ${posted.body}`);
      next = posted.location;
      continue;
    }
    if (!answer.location) throw new Error(`${next} answered ${answer.status}: ${answer.body}`);
    if (answer.location.startsWith(`${gatewayUrl}/bff/callback`))
      return { start, callbackUrl: answer.location };
    next = answer.location;
  }
  throw new Error('too many redirects');
}

/** A full login: returns the callback's answer (a redirect to returnTo with the session cookie). */
export async function login(
  jar: CookieJar,
  gatewayUrl: string,
  user: { username: string; password: string },
  returnTo = '/',
): Promise<Answer> {
  const { callbackUrl } = await loginUntilCallback(jar, gatewayUrl, user, returnTo);
  return request(jar, callbackUrl);
}
