// Test controls under /__simulator/: counters, faults, token revocation, key rotation, reset, received requests.
import express, { type ErrorRequestHandler, type Router } from 'express';
import { ZodError } from 'zod';
import type { OperationAnswer } from './answer-log';
import type { SecondCount } from './calls-per-second';
import type { Faults, FaultsInput } from './faults';
import type { ReceivedRequest, ReceivedTokenRequest } from './request-log';
import type { StatsSnapshot } from './stats';

/** The test controls, in process; `/__simulator/*` exposes the same over HTTP. */
export interface SimulatorControl {
  stats(): StatsSnapshot;
  /** Zeroes the counters, clears faults and the received-requests logs. Issued tokens stay valid. */
  reset(): void;
  /** Validates and replaces the faults (throws on bad input); `{}` clears them. Returns the effective faults. */
  setFaults(faults: FaultsInput): Faults;
  faults(): Faults;
  /** Invalidates every access and refresh token issued so far. */
  revokeTokens(): void;
  /** Signs with a new key from now on; every token signed before fails verification. */
  rotateSigningKey(): void;
  /** Operation calls received in each wall-clock second (last 300 s), and how many were answered 429. */
  callsPerSecond(): SecondCount[];
  /** The last 200 operation requests as received, oldest first. */
  receivedRequests(): ReceivedRequest[];
  /** The headers of the last 200 token endpoint requests (login and refresh), oldest first; never their bodies. */
  receivedTokenRequests(): ReceivedTokenRequest[];
  /** Every operation answer given (the last 100,000), oldest first: account, X-Request-Id, status. */
  answers(): OperationAnswer[];
}

export const CONTROL_PREFIX = '/__simulator';

/** Mounted at {@link CONTROL_PREFIX}, ahead of the upstream paths and outside the IP allow-list. */
export function createControlRouter(control: SimulatorControl): Router {
  const router = express.Router({ strict: false, caseSensitive: true });
  router.use(express.json({ limit: '16kb' }));

  router.get('/stats', (_req, res) => {
    res.json(control.stats());
  });
  router.get('/requests', (_req, res) => {
    res.json(control.receivedRequests());
  });
  router.get('/token-requests', (_req, res) => {
    res.json(control.receivedTokenRequests());
  });
  router.get('/answers', (_req, res) => {
    res.json(control.answers());
  });
  router.get('/calls-per-second', (_req, res) => {
    res.json(control.callsPerSecond());
  });
  router.get('/faults', (_req, res) => {
    res.json(control.faults());
  });
  router.post('/faults', (req, res) => {
    res.json(control.setFaults(req.body ?? {}));
  });
  router.post('/reset', (_req, res) => {
    control.reset();
    res.status(204).end();
  });
  router.post('/revoke-tokens', (_req, res) => {
    control.revokeTokens();
    res.status(204).end();
  });
  router.post('/rotate-signing-key', (_req, res) => {
    control.rotateSigningKey();
    res.status(204).end();
  });
  router.use((_req, res) => {
    res.status(404).json({ error: 'unknown simulator control' });
  });
  router.use(controlErrors);
  return router;
}

const controlErrors: ErrorRequestHandler = (err, _req, res, _next) => {
  if (err instanceof ZodError) {
    res.status(400).json({
      error: 'invalid faults',
      issues: err.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    });
    return;
  }
  if ((err as { type?: string }).type === 'entity.parse.failed') {
    res.status(400).json({ error: 'body is not valid JSON' });
    return;
  }
  res.status(500).json({ error: 'internal simulator error' });
};
