// The provider's endpoints, behind its IP allow-list, with faults and bearer authentication.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import express, { type ErrorRequestHandler, type RequestHandler, type Router } from 'express';
import { decodeJwt } from 'jose';
import { z } from 'zod';
import type { AnswerLog } from './answer-log';
import { validateDocument } from './document-rules';
import type { FaultInjector } from './faults';
import { ipAllowList } from './ip-allow-list';
import type { SimulatorOptions } from './options';
import { findPlan } from './plans';
import type { RequestLog, TokenRequestLog } from './request-log';
import type { StatsRecorder } from './stats';
import {
  findSubscription,
  STATEMENT_CHUNK_BYTES,
  STATEMENT_DEFAULT_KIB,
  STATEMENT_MAX_KIB,
  statementChunk,
} from './subscriptions';
import type { TokenIssuer } from './token-issuer';
import {
  ACCESS_NOT_VALID,
  BAD_CREDENTIALS,
  NOT_AUTHENTICATED,
  PLAN_NOT_FOUND,
  REFRESH_NOT_VALID,
  sendEnvelope,
  sendUnauthorized,
} from './upstream-responses';

export interface UpstreamDependencies {
  options: SimulatorOptions;
  issuer: TokenIssuer;
  stats: StatsRecorder;
  faults: FaultInjector;
  requestLog: RequestLog;
  tokenRequestLog: TokenRequestLog;
  answerLog: AnswerLog;
}

/** The merchant account's user id, as simplejwt puts it in `user_id`. */
export const SIMULATOR_USER_ID = 1;

export const BODY_LIMIT = '64kb';

const documentRequestSchema = z.object({
  country: z.string(),
  document: z.object({ id: z.string(), type: z.string() }),
});

/** The merchant accounts the simulator holds: the main pair is user 1, each extra pair the next id. */
function merchantAccounts(options: SimulatorOptions) {
  const accounts = [
    { username: options.username, password: options.password },
    ...(options.extraAccounts ?? []),
  ].map((account, index) => ({ ...account, userId: SIMULATOR_USER_ID + index }));
  const byUserId = new Map(accounts.map((account) => [account.userId, account.username]));
  return {
    /** The account these credentials log in to; every pair is compared (no early exit on the username). */
    find(username: string, password: string) {
      let found: (typeof accounts)[number] | undefined;
      for (const account of accounts)
        if (constantTimeEqual(username, account.username) && constantTimeEqual(password, account.password))
          found ??= account;
      return found;
    },
    usernameOf: (userId: unknown) => (typeof userId === 'number' ? byUserId.get(userId) : undefined),
    /** Whose token a request carries, for the request log (read, not verified: the log shows what arrived). */
    accountOf(authorization: string | undefined) {
      const token = /^Bearer\s+(\S+)$/.exec(authorization ?? '')?.[1];
      if (!token) return undefined;
      try {
        return byUserId.get(decodeJwt(token).user_id as number);
      } catch {
        return undefined;
      }
    },
    isKnown: (username: string) => accounts.some((account) => account.username === username),
  };
}

export function createUpstreamRouter(deps: UpstreamDependencies): Router {
  const { options, issuer, stats, faults, requestLog, tokenRequestLog, answerLog } = deps;
  const merchants = merchantAccounts(options);
  // The provider (Django) routes by exact path: `/api/token` without the slash is not `/api/token/`.
  const router = express.Router({ strict: true, caseSensitive: true });
  const jsonBody = express.json({ limit: BODY_LIMIT });

  /** Parses the body, logs the request as received, and sets the upstream's session cookie. */
  const operationEntry: RequestHandler = (req, res, next) => {
    const account = merchants.accountOf(req.get('authorization'));
    answerLog.watch(req, res, account);
    jsonBody(req, res, (err?: unknown) => {
      requestLog.record(req, err ? null : req.body, account);
      res.cookie('upstream_session', randomBytes(12).toString('hex'), { httpOnly: true, path: '/' });
      next(err);
    });
  };

  /** Logs the token request's headers before its body is read (the body, a password or refresh token, never). */
  const tokenEntry: RequestHandler = (req, _res, next) => {
    tokenRequestLog.record(req);
    next();
  };

  const requireAccess: RequestHandler = async (req, res, next) => {
    // simplejwt's JWTAuthentication: no header or another scheme means "not authenticated".
    const parts = (req.get('authorization') ?? '').split(/\s+/).filter(Boolean);
    if (parts[0] !== 'Bearer') {
      stats.increment('unauthorized');
      return sendUnauthorized(res, NOT_AUTHENTICATED);
    }
    if (parts.length !== 2) {
      stats.increment('unauthorized');
      return sendUnauthorized(res, {
        detail: 'Authorization header must contain two space-delimited values',
        code: 'bad_authorization_header',
      });
    }
    const claims = await issuer.verify(parts[1]!, 'access');
    if (!claims) {
      stats.increment('unauthorized');
      return sendUnauthorized(res, ACCESS_NOT_VALID);
    }
    const username = merchants.usernameOf(claims.user_id);
    if (username !== undefined) stats.incrementFor(username, 'calls');
    next();
  };

  const login: RequestHandler = async (req, res) => {
    const { values, errors } = charFields(req.body, ['username', 'password']);
    if (errors) {
      stats.increment('loginFailures');
      res.status(400).json(errors);
      return;
    }
    const account = merchants.find(values.username!, values.password!);
    if (!account) {
      stats.increment('loginFailures');
      // A known username with a wrong password is counted for that account (usernames are no secret).
      if (merchants.isKnown(values.username!)) stats.incrementFor(values.username!, 'loginFailures');
      return sendUnauthorized(res, BAD_CREDENTIALS);
    }
    stats.increment('logins');
    stats.incrementFor(account.username, 'logins');
    res.json(await issuer.issuePair(account.userId));
  };

  const refresh: RequestHandler = async (req, res) => {
    const { values, errors } = charFields(req.body, ['refresh']);
    if (errors) {
      stats.increment('refreshFailures');
      res.status(400).json(errors);
      return;
    }
    const claims = await issuer.verify(values.refresh!, 'refresh');
    if (!claims) {
      stats.increment('refreshFailures');
      return sendUnauthorized(res, REFRESH_NOT_VALID);
    }
    stats.increment('refreshes');
    const username = merchants.usernameOf(claims.user_id);
    if (username !== undefined) stats.incrementFor(username, 'refreshes');
    const access = await issuer.issueAccess(claims.user_id);
    if (!options.rotateRefresh) {
      res.json({ access });
      return;
    }
    // ROTATE_REFRESH_TOKENS + BLACKLIST_AFTER_ROTATION: the presented refresh token is spent.
    issuer.blacklist(claims.jti);
    res.json({ access, refresh: await issuer.issueRefresh(claims.user_id) });
  };

  const validate: RequestHandler = (req, res) => {
    stats.increment('validations');
    const parsed = documentRequestSchema.safeParse(req.body);
    if (!parsed.success) {
      const errors = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
      return sendEnvelope(res, 400, 'Malformed request', errors);
    }
    const { country, document } = parsed.data;
    const verdict = validateDocument(country, document.type, document.id);
    res.json(
      verdict.valid
        ? { code: '200', description: 'Valid id and type document' }
        : { code: '300', description: `Invalid param + ${verdict.param}` },
    );
  };

  const readPlan: RequestHandler<{ internalId: string }> = (req, res) => {
    stats.increment('planReads');
    const plan = findPlan(req.params.internalId);
    // The seed gives the body but not the status of "not found": 404 unless the faults ask for 400.
    if (!plan) res.status(faults.current().planNotFoundStatus).json(PLAN_NOT_FOUND);
    else res.json(plan);
  };

  /** GET /api/subscriptions/{id}: the third operation, not in the gateway's shipped catalogue. */
  const readSubscription: RequestHandler<{ id: string }> = (req, res) => {
    const subscription = findSubscription(req.params.id);
    if (!subscription)
      res
        .status(404)
        .json({ status: { code: '404', description: 'ERROR', detail: 'Subscription not found' } });
    else res.json(subscription);
  };

  /**
   * GET /api/subscriptions/{id}/statement[?kib=N]: a large answer (3 MiB of CSV by default), made and written in
   * 64 KiB chunks as the reader takes them (the head leaves at once); a reader who hangs up before the end is counted (statementsCut).
   */
  const exportStatement: RequestHandler<{ id: string }> = (req, res) => {
    const subscription = findSubscription(req.params.id);
    if (!subscription) {
      res
        .status(404)
        .json({ status: { code: '404', description: 'ERROR', detail: 'Subscription not found' } });
      return;
    }
    const kib = Number(req.query.kib ?? STATEMENT_DEFAULT_KIB);
    if (!Number.isInteger(kib) || kib < 1 || kib > STATEMENT_MAX_KIB)
      return sendEnvelope(res, 400, 'Malformed request', [
        { path: 'kib', message: `an integer from 1 to ${STATEMENT_MAX_KIB}` },
      ]);
    stats.increment('statements');
    const size = kib * 1024;
    res.status(200).set({
      'content-type': 'text/csv',
      'content-length': String(size),
      'content-disposition': `attachment; filename="statement-${subscription.id}.csv"`,
    });
    res.once('close', () => {
      if (!res.writableFinished) stats.increment('statementsCut');
    });
    let index = 0;
    const writeMore = () => {
      while (!res.destroyed) {
        const left = size - index * STATEMENT_CHUNK_BYTES;
        const chunk = statementChunk(subscription.id, index++);
        if (left <= chunk.length) {
          res.end(chunk.subarray(0, left));
          return;
        }
        if (!res.write(chunk)) {
          res.once('drain', writeMore);
          return;
        }
      }
    };
    writeMore();
  };

  router.use((_req, _res, next) => {
    stats.increment('requests');
    next();
  });
  router.use(ipAllowList(options.allowedIps, stats));

  router
    .route('/api/token/')
    .post(tokenEntry, jsonBody, faults.middleware('token'), login)
    .all(methodNotAllowed('POST'));
  router
    .route('/api/token/refresh/')
    .post(tokenEntry, jsonBody, faults.middleware('token'), refresh)
    .all(methodNotAllowed('POST'));
  router
    .route('/api/validation/document')
    .all(operationEntry)
    .post(faults.middleware('operation'), requireAccess, validate)
    .all(methodNotAllowed('POST'));
  router
    .route('/api/subscriptions/plan/:internalId')
    .all(operationEntry)
    .get(faults.middleware('operation'), requireAccess, readPlan)
    .all(methodNotAllowed('GET'));
  router
    .route('/api/subscriptions/:id/statement')
    .all(operationEntry)
    .get(faults.middleware('operation'), requireAccess, exportStatement)
    .all(methodNotAllowed('GET'));
  router
    .route('/api/subscriptions/:id')
    .all(operationEntry)
    .get(faults.middleware('operation'), requireAccess, readSubscription)
    .all(methodNotAllowed('GET'));

  router.use((_req, res) => {
    res.status(404).json({ detail: 'Not found.' });
  });
  router.use(upstreamErrors);
  return router;
}

function methodNotAllowed(allowed: string): RequestHandler {
  return (req, res) => {
    res
      .status(405)
      .set('Allow', allowed)
      .json({ detail: `Method "${req.method}" not allowed.` });
  };
}

const upstreamErrors: ErrorRequestHandler = (err, _req, res, _next) => {
  const type = (err as { type?: string }).type;
  if (type === 'entity.parse.failed') {
    return sendEnvelope(res, 400, 'Malformed request', [{ path: '', message: 'Body is not valid JSON' }]);
  }
  if (type === 'entity.too.large') return sendEnvelope(res, 413, 'Request body too large');
  if (typeof type === 'string') return sendEnvelope(res, 400, 'Malformed request');
  sendEnvelope(res, 500, 'Internal simulator error');
};

/**
 * DRF CharField semantics for a simplejwt serializer: every field is required, not null, a string (numbers are
 * accepted as text) and not blank. Errors come back as `{"field":["message"]}`.
 */
function charFields(
  body: unknown,
  names: readonly string[],
): { values: Record<string, string>; errors?: Record<string, string[]> } {
  const source =
    typeof body === 'object' && body !== null && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : {};
  const values: Record<string, string> = {};
  const errors: Record<string, string[]> = {};
  for (const name of names) {
    const value = source[name];
    if (value === undefined) errors[name] = ['This field is required.'];
    else if (value === null) errors[name] = ['This field may not be null.'];
    else if (typeof value !== 'string' && typeof value !== 'number') errors[name] = ['Not a valid string.'];
    else if (String(value).trim() === '') errors[name] = ['This field may not be blank.'];
    else values[name] = String(value).trim();
  }
  return Object.keys(errors).length > 0 ? { values, errors } : { values };
}

function constantTimeEqual(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
