// A validating proxy in front of a gateway: express-openapi-validator checks every request and response against the
// gateway's served /openapi.json (never the zod schemas that generate it), and each exchange's verdict is kept.
import type { AddressInfo } from 'node:net';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';

/** One exchange as the proxy saw it, and what differs from the document. */
export interface Verdict {
  readonly method: string;
  readonly path: string;
  status: number;
  /** What the validator found wrong with the request (empty: the document admits it). */
  readonly request: string[];
  /** What differs between the answer and the document (empty: the document describes it). */
  readonly response: string[];
}

export interface ContractProxy {
  readonly url: string;
  /** The verdict of the exchange sent with header `x-contract-exchange: <id>`. */
  verdict(id: string): Verdict | undefined;
  close(): Promise<void>;
}

/**
 * Headers the document does not declare by design: transport, the security headers every answer carries (helmet),
 * CORS (read by the browser, not by a client) and cookies. Any other answer header a client may read must be declared.
 */
const TRANSPORT_HEADERS = new Set([
  'content-type',
  'content-length',
  'date',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'vary',
  'set-cookie',
  'content-security-policy',
  'strict-transport-security',
  'x-content-type-options',
  'x-frame-options',
  'referrer-policy',
  'cross-origin-resource-policy',
]);
const isTransport = (name: string) => TRANSPORT_HEADERS.has(name) || name.startsWith('access-control-');

type Json = Record<string, any>;

/** The response object of `responses` for `status`: exact, then 4XX-style, then default. */
function responseFor(responses: Json | undefined, status: number): Json | undefined {
  if (!responses) return undefined;
  return responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
}

/** Checks answer headers and the content type against a response object of the document (Ajv for header schemas). */
function headerMismatches(ajv: Ajv2020, response: Json, headers: Headers, hasBody: boolean): string[] {
  const found: string[] = [];
  const declared = new Map(
    Object.entries<Json>(response.headers ?? {}).map(([n, h]) => [n.toLowerCase(), h]),
  );
  for (const [name, header] of declared) {
    const value = headers.get(name);
    if (value === null) {
      if (header.required) found.push(`required header ${name} is missing`);
      continue;
    }
    const validate = ajv.compile(header.schema ?? {});
    if (!validate(value))
      found.push(`header ${name}: ${JSON.stringify(value)} ${ajv.errorsText(validate.errors)}`);
  }
  headers.forEach((_value, name) => {
    if (!isTransport(name) && !declared.has(name)) found.push(`header ${name} is sent but not declared`);
  });
  const type = headers.get('content-type')?.split(';')[0]?.trim().toLowerCase();
  const documented = Object.keys(response.content ?? {});
  if (hasBody && documented.length === 0) found.push(`a body (${type}) where the document lists none`);
  if (hasBody && type && documented.length > 0 && !documented.some((key) => mediaTypeCovers(key, type)))
    found.push(`content type ${type}, the document lists ${documented.join(', ')}`);
  return found;
}

/** Whether a content key of the document (`application/json`, or a range: `text/*`, `*\/*`) covers `type`. */
function mediaTypeCovers(key: string, type: string): boolean {
  const range = key.toLowerCase();
  if (range === '*/*' || range === type) return true;
  return range.endsWith('/*') && type.startsWith(range.slice(0, -1));
}

/** Compiles schemas that refer into the document (#/components/...) by compiling them inside a copy of it. */
function documentSchema(ajv: Ajv2020, document: Json, pointer: string): ValidateFunction {
  return ajv.compile({ ...document, $id: undefined, $ref: pointer });
}

/** One answer read off the wire (a raw socket: what no proxy can pass on, such as a refusal of Node's parser). */
export interface WireAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

/**
 * What differs between `answer` and the document's response for `method` on the path `template` (as the document
 * writes it): the status listed, the headers, and the JSON body against the response's schema.
 */
export function wireAnswerMismatches(
  document: Json,
  method: string,
  template: string,
  answer: WireAnswer,
): string[] {
  const operation = document.paths?.[template]?.[method.toLowerCase()];
  if (!operation) return [`${method} ${template} is not in the document`];
  const response = responseFor(operation.responses, answer.status);
  if (!response) return [`status ${answer.status} is not documented`];
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  return [
    ...headerMismatches(ajv, response, answer.headers, answer.body.length > 0),
    ...jsonBodyMismatches(ajv, document, response, answer.status, answer.body),
  ];
}

/**
 * A JSON body against its response's schema, compiled inside the document (for its $refs); `compiled` keeps each
 * schema's validator across calls.
 */
function jsonBodyMismatches(
  ajv: Ajv2020,
  document: Json,
  response: Json,
  status: number,
  text: string,
  compiled = new WeakMap<object, ValidateFunction>(),
): string[] {
  const schema = response.content?.['application/json']?.schema;
  if (!schema || text.length === 0) return [];
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile({
      ...document,
      $id: undefined,
      'x-contract-body': schema,
      $ref: '#/x-contract-body',
    });
    compiled.set(schema, validate);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return [`body of ${status} is not JSON`];
  }
  return validate(body) ? [] : [`body of ${status}: ${ajv.errorsText(validate.errors)}`];
}

/** Starts the proxy on loopback in front of `target`, validating against `document` (the served /openapi.json). */
export async function startContractProxy(target: string, document: Json): Promise<ContractProxy> {
  const verdicts = new Map<string, Verdict>();
  const verdictOf = new WeakMap<Request, Verdict>();
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const envelope = documentSchema(ajv, document, '#/components/schemas/ErrorEnvelope');
  const bodySchemas = new WeakMap<object, ValidateFunction>();
  const app = express();
  app.set('query parser', 'simple');

  // The raw body is forwarded as sent; a parsed copy is what the validator reads.
  app.use(express.raw({ type: () => true, limit: '1mb' }));
  app.use((req, res, next) => {
    const id = String(req.headers['x-contract-exchange'] ?? '');
    const verdict: Verdict = {
      method: req.method,
      path: req.originalUrl,
      status: 0,
      request: [],
      response: [],
    };
    verdicts.set(id, verdict);
    verdictOf.set(req, verdict);
    res.locals.verdict = verdict;
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    res.locals.raw = raw;
    const type = req.headers['content-type'] ?? '';
    if (raw.length === 0) req.body = undefined;
    else if (type.includes('json')) {
      try {
        req.body = JSON.parse(raw.toString());
      } catch {
        req.body = raw.toString();
      }
    } else if (type.includes('x-www-form-urlencoded'))
      req.body = Object.fromEntries(new URLSearchParams(raw.toString()));
    else req.body = raw.toString();
    next();
  });
  const middlewares = OpenApiValidator.middleware({
    apiSpec: structuredClone(document) as never,
    validateRequests: true,
    validateResponses: {
      onError: (error, _body, req) => {
        verdictOf.get(req)?.response.push(describe(error));
      },
    },
    validateSecurity: true,
    ignoreUndocumented: true,
  });
  // Each validator step records what it finds and lets the exchange go on: the gateway answers every request.
  for (const step of middlewares as unknown as RequestHandler[])
    app.use((req: Request, res: Response, next: NextFunction) =>
      step(req, res, (error?: unknown) => {
        if (error) (res.locals.verdict as Verdict).request.push(describe(error));
        next();
      }),
    );
  app.use(async (req, res) => {
    const verdict = res.locals.verdict as Verdict;
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers))
      if (typeof value === 'string' && !['host', 'x-contract-exchange', 'content-length'].includes(name))
        headers.set(name, value);
    const raw = res.locals.raw as Buffer;
    const answer = await fetch(target + req.originalUrl, {
      method: req.method,
      headers,
      body: raw.length > 0 ? new Uint8Array(raw) : undefined,
      redirect: 'manual',
    });
    const text = await answer.text();
    verdict.status = answer.status;
    const operation = (req as Request & { openapi?: { schema?: Json } }).openapi?.schema;
    const response = operation ? responseFor(operation.responses, answer.status) : unmatchedResponse(req);
    if (!response) verdict.response.push(`status ${answer.status} is not documented`);
    else verdict.response.push(...headerMismatches(ajv, response, answer.headers, text.length > 0));
    if (!operation && response && text.length > 0 && !envelope(JSON.parse(text)))
      verdict.response.push(`body: ${ajv.errorsText(envelope.errors)}`);
    // express-openapi-validator leaves every answer >= 500 unchecked (its res.json hook skips them): check it here.
    if (operation && response && answer.status >= 500)
      verdict.response.push(...jsonBodyMismatches(ajv, document, response, answer.status, text, bodySchemas));
    res.status(answer.status);
    answer.headers.forEach((value, name) => {
      if (!['content-length', 'transfer-encoding', 'connection', 'content-encoding'].includes(name))
        res.setHeader(name, value);
    });
    const json = answer.headers.get('content-type')?.includes('json');
    // res.json runs the validator's response check (the answer's body, or none, against its status's content).
    if (operation && (json || text.length === 0)) res.json(text.length > 0 ? JSON.parse(text) : undefined);
    else res.send(text);
  });

  /** No operation matched: a listed path with another method, or no listed path at all. */
  function unmatchedResponse(req: Request): Json {
    const listed = Object.keys(document.paths).some((template) =>
      new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(req.path),
    );
    return document.components.responses[listed ? 'MethodNotAllowed' : 'NotFound'];
  }

  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    verdict: (id) => verdicts.get(id),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function describe(error: unknown): string {
  const e = error as { message?: string; errors?: { path?: string; message?: string }[] };
  const details = (e.errors ?? []).map((item) => `${item.path ?? ''} ${item.message ?? ''}`.trim());
  return details.length > 0 ? details.join('; ') : String(e.message ?? error);
}
