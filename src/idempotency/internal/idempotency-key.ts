// The Idempotency-Key request header read and checked (SPEC §13): one header of 1–255 visible ASCII characters.
import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../../http/gateway-error';

export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
const MAX_KEY_LENGTH = 255;
/** Visible ASCII (VCHAR, 0x21–0x7E): no space, no control character, nothing beyond ASCII. */
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/**
 * The caller's key, or undefined when the request carries none. Several headers (Node would join them with a comma
 * into one plausible key), an empty one, one too long or with any other character: 400 INVALID_REQUEST.
 */
export function readIdempotencyKey(req: Pick<IncomingMessage, 'headersDistinct'>): string | undefined {
  const values = req.headersDistinct[IDEMPOTENCY_KEY_HEADER];
  if (values === undefined || values.length === 0) return undefined;
  if (values.length > 1) throw malformed('Send one Idempotency-Key header, not several.');
  const key = values[0] as string;
  if (key.length === 0 || key.length > MAX_KEY_LENGTH)
    throw malformed(`The Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters long.`);
  if (!VISIBLE_ASCII.test(key))
    throw malformed(
      'The Idempotency-Key may hold visible ASCII characters only (no space or control character).',
    );
  return key;
}

/** The key a request must carry on an operation that declares `idempotency: "required"`. */
export function missingIdempotencyKey(): GatewayError {
  return malformed('This operation requires an Idempotency-Key header.');
}

function malformed(message: string): GatewayError {
  return new GatewayError('INVALID_REQUEST', 'The Idempotency-Key header is not valid.', {
    errors: [{ path: 'header:Idempotency-Key', message }],
  });
}
