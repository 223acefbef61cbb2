// What stands between a caller and an operation, as the HTTP pipeline places it: each guard is built in this folder.
import type { RequestHandler } from 'express';
import type { Scope } from './caller';

/** Who may call, built by src/callers: the app only decides where each guard stands. */
export interface CallerGuards {
  readonly inboundAllowList: RequestHandler;
  readonly cors: RequestHandler;
  readonly authenticate: RequestHandler;
  requireScope(scope: Scope): RequestHandler;
  readonly rateLimit: RequestHandler;
  /** Which provider account the request uses (X-Upstream-Account, else the caller's default): req.account. */
  readonly chooseAccount: RequestHandler;
}
