// Renders every gateway-made error in the one error envelope, and turns anything else into a safe 500.
import type { ErrorRequestHandler, Response } from 'express';
import { GatewayError, isGatewayError } from './gateway-error';

export interface ErrorEnvelope {
  status: { code: string; description: string; detail: string };
  requestId: string;
  errors?: { path: string; message: string }[];
}

export function envelopeOf(error: GatewayError, requestId: string): ErrorEnvelope {
  const envelope: ErrorEnvelope = {
    status: { code: String(error.status), description: error.reason, detail: error.detail },
    requestId,
  };
  if (error.errors) envelope.errors = error.errors.map(({ path, message }) => ({ path, message }));
  return envelope;
}

export function sendError(res: Response, error: GatewayError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  // For the usage ledger, which counts refusals by reason at the end of the request.
  res.locals.refusal = error.reason;
  res.status(error.status).json(envelopeOf(error, String(res.getHeader('x-request-id') ?? '')));
}

/** Errors of Express and body-parser that a caller causes, as 4xx reasons; anything else stays unknown. */
function fromCallerMistake(error: {
  name?: string;
  type?: string;
  code?: string;
  status?: number;
  expose?: boolean;
}): GatewayError | undefined {
  // The router could not percent-decode a path parameter (e.g. `%ZZ`, `%E0%A4%A`).
  if (error.name === 'URIError') {
    return new GatewayError('INVALID_REQUEST', 'The request path is not valid percent-encoding.');
  }
  // Body-parser errors carry a `type`.
  switch (error.type) {
    case 'entity.too.large':
      return new GatewayError('PAYLOAD_TOO_LARGE', 'The request body is larger than the gateway accepts.');
    case 'parameters.too.many':
      // The urlencoded parser's parameterLimit (/bff/backchannel-logout): 413 from body-parser, once a 500 here.
      return new GatewayError(
        'PAYLOAD_TOO_LARGE',
        'The request body has more fields than the gateway accepts.',
      );
    case 'entity.parse.failed':
      return new GatewayError('INVALID_REQUEST', 'The request body is not valid JSON.', {
        errors: [{ path: '', message: 'invalid JSON' }],
      });
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'The request body encoding is not supported.');
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
    case 'stream.not.readable':
    case 'entity.verify.failed':
    case 'querystring.parse.rangeError':
      return new GatewayError('INVALID_REQUEST', 'The request body could not be read.');
  }
  // A gzip/deflate/br/zstd body that does not decompress: body-parser passes zlib's error on with no `type`.
  if (error.code?.startsWith('Z_') || error.code?.startsWith('ERR__') || error.code?.startsWith('ZSTD_'))
    return new GatewayError('INVALID_REQUEST', 'The request body could not be decompressed.');
  // Any other body-parser failure (a `type` this list does not know yet), or anything marked as the caller's (a 4xx,
  // exposable, as http-errors marks them): still the caller's mistake, never a 500.
  const status = error.status ?? 0;
  if ((typeof error.type === 'string' || error.expose === true) && status >= 400 && status < 500)
    return callerMistakeOfStatus(status);
  return undefined;
}

function callerMistakeOfStatus(status: number): GatewayError {
  if (status === 413)
    return new GatewayError('PAYLOAD_TOO_LARGE', 'The request body is larger than the gateway accepts.');
  if (status === 415)
    return new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'The request body encoding is not supported.');
  return new GatewayError('INVALID_REQUEST', 'The request body could not be read.');
}

/** The last middleware: whatever reached it becomes one envelope; internals are logged, never answered. */
export function errorEnvelopeHandler(): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const known = isGatewayError(error) ? error : fromCallerMistake(error ?? {});
    if (known) {
      sendError(res, known);
      return;
    }
    // The logger's error serializer leaves out what an error carries of the request (body-parser's `body`).
    req.log?.error({ err: error }, 'unhandled error');
    sendError(res, new GatewayError('INTERNAL_ERROR', 'The gateway failed to handle the request.'));
  };
}
