// The two forwarded operations: validate and sanitize the input, forward it, pass the upstream answer through.
import type { Request, RequestHandler } from 'express';
import { type AccountForwarding, sendAnswer } from '../forwarding';
import type { DocumentReference } from '../observability/document-reference';
import { documentValidationRequest, planParams } from './schemas';
import { parseOrReject } from './validate-input';

export const VALIDATION_PATH = '/api/validation/document';
export const PLAN_PATH = '/api/subscriptions/plan/:internalId';
/** The forwarded operations by route name: each has its own upstream circuit. */
export const FORWARDED_OPERATIONS = ['validation', 'plan'] as const;

/** The provider account chosen for this request (the chooseAccount guard stands before every operation). */
function accountOf(req: Request): AccountForwarding {
  const account = req.account;
  if (!account) throw new Error('no provider account was chosen for this request');
  return account;
}

export function validateDocumentHandler(documentReference: DocumentReference): RequestHandler {
  return async (req, res) => {
    const body = parseOrReject(documentValidationRequest, req.body, 'request body');
    // For the request log: no character of the id itself, only its keyed reference.
    res.locals.document = {
      country: body.country,
      type: body.document.type,
      ref: documentReference(body.document.id),
    };
    const answer = await accountOf(req).forwarder.forward(req, res, {
      route: 'validation',
      method: 'POST',
      path: '/api/validation/document',
      body: Buffer.from(JSON.stringify(body)),
    });
    sendAnswer(res, answer);
  };
}

export function getPlanHandler(): RequestHandler {
  return async (req, res) => {
    const { internalId } = parseOrReject(planParams, req.params, 'plan id');
    sendAnswer(res, await accountOf(req).plans.read(req, res, internalId));
  };
}
