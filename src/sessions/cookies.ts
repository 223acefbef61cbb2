// The session and login cookies: names, attributes and reading them from a Cookie header.
import type { Request, Response } from 'express';

/** `__Host-`: the browser accepts it only Secure, from the host itself, with Path=/ and no Domain (no tossing from a sibling). */
export const SESSION_COOKIE = '__Host-bff-session';
/** Binds a login to the browser that started it; Lax, because the provider sends the browser back cross-site. */
export const LOGIN_COOKIE = '__Host-bff-login';

/** Every value the browser sent under `name` (a second one means someone planted a cookie). */
export function cookieValues(req: Request, name: string): string[] {
  const header = req.headers.cookie;
  if (!header) return [];
  const values: string[] = [];
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) values.push(part.slice(at + 1).trim());
  }
  return values;
}

/** A browser holds one `__Host-` cookie of a name; a few more are someone's planting, hundreds a flood. */
const MAX_ENDED_PER_REQUEST = 4;

/** The distinct values of `name` worth ending (logout, a new login): the first few, never one lookup per copy. */
export function cookieValuesToEnd(req: Request, name: string): string[] {
  return [...new Set(cookieValues(req, name))].slice(0, MAX_ENDED_PER_REQUEST);
}

/** The one value of `name`, or undefined when absent or sent more than once. */
export function singleCookie(req: Request, name: string): string | undefined {
  const values = cookieValues(req, name);
  return values.length === 1 ? values[0] : undefined;
}

export function setSessionCookie(res: Response, id: string, maxAgeSeconds: number): void {
  res.append(
    'Set-Cookie',
    `${SESSION_COOKIE}=${id}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`,
  );
}

export function setLoginCookie(res: Response, value: string, maxAgeSeconds: number): void {
  res.append(
    'Set-Cookie',
    `${LOGIN_COOKIE}=${value}; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}`,
  );
}

export function clearCookie(res: Response, name: string): void {
  const sameSite = name === LOGIN_COOKIE ? 'Lax' : 'Strict';
  res.append('Set-Cookie', `${name}=; Path=/; Secure; HttpOnly; SameSite=${sameSite}; Max-Age=0`);
}
