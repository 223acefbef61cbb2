// The two forwarded operations: validate and sanitize the input, forward it, pass the upstream answer through.
import type { Request, RequestHandler } from 'express';
import { type AccountForwarding, sendAnswer, type UpstreamExchange } from '../forwarding';
import type { Idempotency, IdempotencyPolicy } from '../idempotency';
import type { DocumentReference } from '../observability/document-reference';
import { documentValidationRequest, planParams } from './schemas';
import { parseOrReject } from './validate-input';

export const VALIDATION_PATH = '/api/validation/document';
export const PLAN_PATH = '/api/subscriptions/plan/:internalId';
/** The forwarded operations by route name: each has its own upstream circuit. */
export const FORWARDED_OPERATIONS = ['validation', 'plan'] as const;

/**
 * What each operation declares of Idempotency-Key (SPEC §12/§13), by operation name: the one lookup the operations
 * catalogue will feed (its `idempotency` and `forwardIdempotencyKey` fields). Unlisted: `none` (the header ignored).
 */
const IDEMPOTENCY_POLICIES: Readonly<Record<string, IdempotencyPolicy>> = {
  validation: { idempotency: 'optional', forwardIdempotencyKey: false },
};
const NO_IDEMPOTENCY: IdempotencyPolicy = { idempotency: 'none', forwardIdempotencyKey: false };

export function idempotencyPolicyFor(operation: string): IdempotencyPolicy {
  return IDEMPOTENCY_POLICIES[operation] ?? NO_IDEMPOTENCY;
}

/** The provider account chosen for this request (the chooseAccount guard stands before every operation). */
function accountOf(req: Request): AccountForwarding {
  const account = req.account;
  if (!account) throw new Error('no provider account was chosen for this request');
  return account;
}

export function validateDocumentHandler(
  documentReference: DocumentReference,
  idempotency?: Idempotency,
): RequestHandler {
  const policy = idempotencyPolicyFor('validation');
  return async (req, res) => {
    const body = parseOrReject(documentValidationRequest, req.body, 'request body');
    // For the request log: no character of the id itself, only its keyed reference.
    res.locals.document = {
      country: body.country,
      type: body.document.type,
      ref: documentReference(body.document.id),
    };
    const exchange: UpstreamExchange = {
      route: 'validation',
      method: 'POST',
      path: '/api/validation/document',
      body: Buffer.from(JSON.stringify(body)),
    };
    const forward = (idempotencyKey: string | undefined) =>
      accountOf(req).forwarder.forward(req, res, idempotencyKey ? { ...exchange, idempotencyKey } : exchange);
    // The fingerprint is of the body as the caller sent it (req.body), validated above: a 400 claims nothing.
    const answer = idempotency
      ? await idempotency.forward(
          req,
          res,
          { operation: 'validation', policy, method: 'POST', path: VALIDATION_PATH, body: req.body },
          forward,
        )
      : await forward(undefined);
    sendAnswer(res, answer);
  };
}

export function getPlanHandler(): RequestHandler {
  return async (req, res) => {
    const { internalId } = parseOrReject(planParams, req.params, 'plan id');
    sendAnswer(res, await accountOf(req).plans.read(req, res, internalId));
  };
}
