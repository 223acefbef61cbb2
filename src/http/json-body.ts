// Reads a JSON body: application/json only (415), bounded size (413), strict JSON (400).
import express, { type RequestHandler } from 'express';
import { GatewayError } from './gateway-error';

export function jsonBody(limitBytes: number): RequestHandler[] {
  const requireJson: RequestHandler = (req, _res, next) => {
    if (!req.is('application/json')) {
      next(new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'The request body must be application/json.'));
      return;
    }
    next();
  };
  return [requireJson, express.json({ limit: limitBytes, strict: true, type: () => true })];
}
