// The provider's response bodies, word for word: simplejwt's 400/401 shapes and the payments error envelope.
import type { Response } from 'express';

export const BAD_CREDENTIALS = { detail: 'No active account found with the given credentials' } as const;

export const REFRESH_NOT_VALID = { detail: 'Token is invalid or expired', code: 'token_not_valid' } as const;

export const ACCESS_NOT_VALID = {
  detail: 'Given token not valid for any token type',
  code: 'token_not_valid',
  messages: [{ token_class: 'AccessToken', token_type: 'access', message: 'Token is invalid or expired' }],
} as const;

export const NOT_AUTHENTICATED = { detail: 'Authentication credentials were not provided.' } as const;

export const FORBIDDEN = { detail: 'You do not have permission to perform this action.' } as const;

export const PLAN_NOT_FOUND = {
  status: { code: '400', description: 'ERROR', detail: 'Plan subscription not found' },
} as const;

export interface FieldError {
  path: string;
  message: string;
}

/** The payments error envelope: `{"status":{"code","description","detail"},"errors":[...]}`. */
export function sendEnvelope(
  res: Response,
  httpStatus: number,
  detail: string,
  errors: FieldError[] = [],
): void {
  res.status(httpStatus).json({ status: { code: String(httpStatus), description: 'ERROR', detail }, errors });
}

/** simplejwt (DRF) answers 401 with a WWW-Authenticate challenge. */
export function sendUnauthorized(res: Response, body: object): void {
  res.status(401).set('WWW-Authenticate', 'Bearer realm="api"').json(body);
}
