// Runs a schema over untrusted input and turns its complaints into one INVALID_REQUEST naming each bad path.
import type { z } from 'zod';
import { GatewayError } from '../http/gateway-error';

export function parseOrReject<T extends z.ZodType>(schema: T, input: unknown, what: string): z.output<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const errors = result.error.issues.slice(0, 20).map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.code === 'invalid_type' ? `expected ${issue.expected}` : issue.message,
  }));
  throw new GatewayError('INVALID_REQUEST', `The ${what} is invalid.`, { errors });
}
