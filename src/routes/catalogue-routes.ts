// The routes of the operations catalogue (SPEC §12): one Express router per loaded catalogue, each operation behind
// its guards, validated by what the catalogue compiled, forwarded under its operationId; and the 405s of its paths.
import express, { type Request, type RequestHandler, type Router } from 'express';
import type { Scope } from '../callers/caller';
import type { CallerGuards } from '../callers/caller-guards';
import type { Catalogue, CatalogueOperation } from '../catalogue';
import { type AccountForwarding, sendAnswer, type UpstreamExchange } from '../forwarding';
import { jsonBody } from '../http/json-body';
import { methodNotAllowed } from '../http/unmatched';
import type { Idempotency } from '../idempotency';
import type { DocumentReference } from '../observability/document-reference';
import { routeName } from '../observability/request-log';
import { requestLogNote } from './request-log-notes';

export interface CatalogueRouteDeps {
  readonly guards: CallerGuards;
  /** The authentication guard as the app wraps it (in its span). */
  readonly authenticate: RequestHandler;
  readonly bodyLimitBytes: number;
  readonly documentReference: DocumentReference;
  /** Idempotency-Key (SPEC §13) for the operations that declare `idempotency`; absent: the header is ignored. */
  readonly idempotency?: Idempotency;
  /** PLAN_CACHE_TTL_SECONDS: the cache of `plan` when the catalogue gives it none (kept for existing deployments). */
  readonly planCacheTtlSeconds: number;
}

/** The two routers of one catalogue: its operations, and the 405s of its paths (placed after the other routes). */
export interface CatalogueRoutes {
  readonly operations: Router;
  readonly otherMethods: Router;
}

/** The provider account chosen for this request (the chooseAccount guard stands before every operation). */
function accountOf(req: Request): AccountForwarding {
  const account = req.account;
  if (!account) throw new Error('no provider account was chosen for this request');
  return account;
}

/** The raw query string (the app parses none): only operations that declare query parameters read it. */
function rawQueryOf(req: Request): string | undefined {
  const at = req.url.indexOf('?');
  return at < 0 ? undefined : req.url.slice(at + 1);
}

export function catalogueRoutes(catalogue: Catalogue, deps: CatalogueRouteDeps): CatalogueRoutes {
  const operations = express.Router();
  const allowed = new Map<string, Set<string>>();
  for (const operation of catalogue.operations) {
    const chain: RequestHandler[] = [
      routeName(operation.id),
      deps.authenticate,
      deps.guards.requireScope(operation.scope as Scope),
      deps.guards.rateLimit,
      deps.guards.chooseAccount,
      ...(operation.hasBody ? [jsonBody(deps.bodyLimitBytes)] : []),
      operationHandler(operation, deps),
    ];
    const method = operation.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    operations[method](operation.route, ...chain);
    const methods = allowed.get(operation.route) ?? new Set<string>();
    methods.add(operation.method);
    // Express answers HEAD with the GET route (without the body); the provider only ever sees the GET.
    if (operation.method === 'GET') methods.add('HEAD');
    allowed.set(operation.route, methods);
  }
  const otherMethods = express.Router();
  for (const [route, methods] of allowed) {
    const name = catalogue.operations.find((operation) => operation.route === route)?.id ?? 'unmatched';
    const refuse = methodNotAllowed([...methods].join(', '));
    otherMethods.all(route, routeName(name), refuse);
    // An Express router answers an OPTIONS it has no route for by itself (200 and Allow): 405, as every other method.
    operations.options(route, routeName(name), refuse);
  }
  return { operations, otherMethods };
}

function operationHandler(operation: CatalogueOperation, deps: CatalogueRouteDeps): RequestHandler {
  const { id: route, timeoutMs, request, filterAnswer, answerVersion } = operation;
  if (operation.answer === 'stream') return streamHandler(operation, deps);
  if (operation.method === 'GET') {
    const ttlSeconds = operation.cacheTtlSeconds ?? (route === 'plan' ? deps.planCacheTtlSeconds : 0);
    // Not an async frame: a read in flight keeps every frame it waits in alive (issue 40). Express takes a throw
    // here or the promise's rejection alike to the error handler.
    return (req, res) => {
      const { path } = request.validate(req.params, rawQueryOf(req), undefined);
      const exchange = {
        route,
        method: 'GET' as const,
        path,
        ttlSeconds,
        filter: filterAnswer,
        answerVersion,
        timeoutMs,
      };
      return accountOf(req)
        .reads.read(req, res, exchange)
        .then((answer) => sendAnswer(res, answer));
    };
  }
  const method = operation.method;
  const note = requestLogNote(route);
  return async (req, res) => {
    const valid = request.validate(req.params, rawQueryOf(req), operation.hasBody ? req.body : undefined);
    // For the request log: what the operation's note says of the body (never a secret, never a document id).
    if (note && valid.body !== undefined) res.locals.document = note(valid.body, deps.documentReference);
    const body = valid.body === undefined ? undefined : Buffer.from(JSON.stringify(valid.body));
    const exchange: UpstreamExchange = { route, method, path: valid.path, body, timeoutMs };
    const forward = async (idempotencyKey: string | undefined) => {
      const answer = await accountOf(req).forwarder.forward(
        req,
        res,
        idempotencyKey === undefined ? exchange : { ...exchange, idempotencyKey },
      );
      return filterAnswer ? filterAnswer(answer) : answer;
    };
    // Idempotency-Key (SPEC §13): the fingerprint is of the body as the caller sent it (validated above: a 400 claims
    // nothing), and what is kept is the answer as this caller got it (filtered).
    const answer = deps.idempotency
      ? await deps.idempotency.forward(
          req,
          res,
          { operation: route, policy: operation, method, path: valid.path, body: req.body, timeoutMs },
          forward,
        )
      : await forward(undefined);
    sendAnswer(res, answer);
  };
}

/**
 * `answer: "stream"`: the provider's answer is piped to the caller as it arrives (http-proxy-middleware), never read,
 * so never coalesced, cached or kept (the catalogue refuses cache and idempotency beside it); each caller its own call.
 */
function streamHandler(operation: CatalogueOperation, deps: CatalogueRouteDeps): RequestHandler {
  const { id: route, method, timeoutMs, request } = operation;
  const note = requestLogNote(route);
  return async (req, res) => {
    const valid = request.validate(req.params, rawQueryOf(req), operation.hasBody ? req.body : undefined);
    if (note && valid.body !== undefined) res.locals.document = note(valid.body, deps.documentReference);
    const body = valid.body === undefined ? undefined : Buffer.from(JSON.stringify(valid.body));
    await accountOf(req).forwarder.stream(req, res, { route, method, path: valid.path, body, timeoutMs });
  };
}
