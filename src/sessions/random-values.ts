// The random values and the sealed JSON records shared by sessions and logins.
import { randomBytes } from 'node:crypto';
import type { z } from 'zod';

/** 32 random bytes, base64url (43 characters): session ids, login states, nonces, PKCE verifiers, login bindings. */
export function randomValue(): string {
  return randomBytes(32).toString('base64url');
}

/** Parses an opened record's JSON against `schema`: the value, or undefined when it is not JSON or not valid. */
export function schemaParser<T>(schema: z.ZodType<T>): (text: string) => T | undefined {
  return (text) => {
    try {
      const parsed = schema.safeParse(JSON.parse(text));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  };
}
