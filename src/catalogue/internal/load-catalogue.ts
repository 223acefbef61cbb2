// Reads and checks OPERATIONS_FILE (SPEC §12): OpenAPI 3.1 (JSON, or YAML by its name), `x-gateway` against
// config/operations.schema.json, local references only, every served operation's validation compiled here, once.
import { readFileSync } from 'node:fs';
import type { ValidateFunction } from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import { parse as parseYaml } from 'yaml';
import { sha256Hex } from '../../keys/hash';
import { compileAnswerFilter } from './answer-filter';
import type { Catalogue, CatalogueOperation, OperationMethod } from './catalogue';
import { EXTENSION_SCHEMA, type GatewayExtension } from './extension-schema';
import { badReferences, inlineReferences, RecursiveReferenceError } from './local-refs';
import { compileRequestValidator, createCompilers, type QueryParameter } from './request-validator';
import { expressPath, parsePathTemplate } from './upstream-path';

/** A document the gateway refuses: every problem found, each naming the operation and the field. */
export class CatalogueError extends Error {
  constructor(
    readonly file: string,
    readonly problems: readonly string[],
  ) {
    super(`${file}: ${problems.join('; ')}`);
    this.name = 'CatalogueError';
  }
}

export interface CatalogueOptions {
  /** UPSTREAM_TIMEOUT_MS: no operation's timeoutMs may be longer. */
  readonly maxTimeoutMs: number;
}

const METHODS: readonly OperationMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const OTHER_METHODS = ['head', 'options', 'trace'];
/** operationIds are metric labels and ledger columns: short, plain. */
const OPERATION_ID = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;
const PATH_PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

let checkExtension: ValidateFunction | undefined;
function extensionValidator(): ValidateFunction {
  checkExtension ??= new Ajv2020({ allErrors: true, strict: true }).compile(EXTENSION_SCHEMA);
  return checkExtension;
}

type Json = Record<string, unknown>;
const isRecord = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Reads the file and builds the catalogue; throws CatalogueError (never anything else for a bad document). */
export function loadCatalogue(file: string, options: CatalogueOptions): Catalogue {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CatalogueError(file, [`cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`]);
  }
  return parseCatalogue(text, /\.ya?ml$/i.test(file) ? 'yaml' : 'json', options, file);
}

export function parseCatalogue(
  text: string,
  format: 'json' | 'yaml',
  options: CatalogueOptions,
  file = 'OPERATIONS_FILE',
): Catalogue {
  let document: unknown;
  try {
    document = format === 'yaml' ? parseYaml(text, { uniqueKeys: true, merge: true }) : JSON.parse(text);
  } catch (error) {
    throw new CatalogueError(file, [`is not valid ${format.toUpperCase()}: ${(error as Error).message}`]);
  }
  const problems: string[] = [];
  const catalogue = buildCatalogue(document, options, problems);
  if (problems.length > 0 || !catalogue) throw new CatalogueError(file, problems);
  return catalogue;
}

function buildCatalogue(
  document: unknown,
  options: CatalogueOptions,
  problems: string[],
): Catalogue | undefined {
  if (!isRecord(document)) {
    problems.push('must be an OpenAPI document (a JSON object)');
    return undefined;
  }
  if (typeof document.openapi !== 'string' || !document.openapi.startsWith('3.1')) {
    problems.push('openapi must be "3.1.x"');
  }
  if (!isRecord(document.paths)) {
    problems.push('paths must be an object');
    return undefined;
  }
  problems.push(...badReferences(document));
  if (problems.length > 0) return undefined;

  const compilers = createCompilers();
  const operations: CatalogueOperation[] = [];
  const unserved: string[] = [];
  const seenRoutes = new Map<string, string>();
  const seenIds = new Set<string>();
  const publishedPaths: Record<string, unknown> = {};

  for (const [path, rawItem] of Object.entries(document.paths)) {
    if (!isRecord(rawItem)) {
      problems.push(`paths.${path}: must be a path item object`);
      continue;
    }
    if (rawItem['x-gateway'] !== undefined)
      problems.push(
        `paths.${path}: x-gateway belongs on an operation (${METHODS.join(', ').toLowerCase()}), not on the path item`,
      );
    // Served but never published, its x-gateway published with components: the path item is written in place.
    if (rawItem.$ref !== undefined)
      problems.push(`paths.${path}: a path item must be written in place, not a $ref`);
    const published = withoutExtension(rawItem);
    if (published) publishedPaths[path] = published;
    const item = inlineSafely(document, rawItem, `paths.${path}`, problems);
    if (!item) continue;
    for (const [key, rawOperation] of Object.entries(item)) {
      const operation = operationOf(
        { document, path, key, rawOperation, item },
        { options, compilers, problems, unserved },
      );
      if (!operation) continue;
      const where = `${operation.method} ${path} (${operation.id})`;
      const routeKey = `${operation.method} ${path.replace(/\{[^}]*\}/g, '{}').toLowerCase()}`;
      const other = seenRoutes.get(routeKey);
      if (other) problems.push(`${where}: the same path and method as ${other}`);
      seenRoutes.set(routeKey, where);
      if (seenIds.has(operation.id)) problems.push(`${where}: operationId ${operation.id} is used twice`);
      seenIds.add(operation.id);
      operations.push(operation);
    }
  }
  // Literal segments before templated ones: `/a/b` is tried before `/a/{x}`.
  const order = (op: CatalogueOperation) => (op.path.match(/\{/g) ?? []).length;
  operations.sort((a, b) => order(a) - order(b));
  return {
    operations,
    unserved,
    published: {
      paths: publishedPaths,
      // No x-gateway (upstream paths, scopes) anywhere in what callers read, wherever the author left one.
      components: isRecord(document.components) ? withoutGatewayKeys(document.components) : {},
    },
  };
}

/** One method of a path item: compiled when served, listed in `unserved` when it has no scope, else skipped. */
function operationOf(
  at: { document: unknown; path: string; key: string; rawOperation: unknown; item: Json },
  load: {
    options: CatalogueOptions;
    compilers: ReturnType<typeof createCompilers>;
    problems: string[];
    unserved: string[];
  },
): CatalogueOperation | undefined {
  const { path, key, rawOperation } = at;
  const { problems } = load;
  const method = key.toUpperCase() as OperationMethod;
  if (!METHODS.includes(method)) {
    if (OTHER_METHODS.includes(key) && isRecord(rawOperation) && rawOperation['x-gateway'] !== undefined)
      problems.push(`${key.toUpperCase()} ${path}: the gateway serves only ${METHODS.join(', ')}`);
    return undefined;
  }
  if (!isRecord(rawOperation)) return undefined;
  const name = typeof rawOperation.operationId === 'string' ? rawOperation.operationId : undefined;
  const where = `${method} ${path}${name ? ` (${name})` : ''}`;
  const extension = rawOperation['x-gateway'];
  if (extension === undefined || (isRecord(extension) && extension.scope === undefined)) {
    if (extension !== undefined) checkExtensionShape(extension, where, problems);
    load.unserved.push(where);
    return undefined;
  }
  if (!checkExtensionShape(extension, where, problems)) return undefined;
  const source = { ...at, method, where, name, raw: rawOperation, extension: extension as GatewayExtension };
  return compileOperation(source, load.options, load.compilers, problems);
}

function inlineSafely(document: unknown, node: unknown, where: string, problems: string[]): Json | undefined {
  try {
    return inlineReferences(document, node) as Json;
  } catch (error) {
    if (error instanceof RecursiveReferenceError) {
      problems.push(`${where}: ${error.message} (recursive schemas are not supported)`);
      return undefined;
    }
    throw error;
  }
}

function checkExtensionShape(extension: unknown, where: string, problems: string[]): boolean {
  const check = extensionValidator();
  if (check(extension)) return true;
  for (const error of check.errors ?? []) {
    const field = `x-gateway${error.instancePath.replaceAll('/', '.')}`;
    if (error.keyword === 'additionalProperties')
      problems.push(
        `${where}: ${field} has an unknown field "${(error.params as { additionalProperty: string }).additionalProperty}"`,
      );
    else problems.push(`${where}: ${field} ${error.message ?? 'is invalid'}`);
  }
  return false;
}

interface OperationSource {
  readonly document: unknown;
  readonly path: string;
  readonly method: OperationMethod;
  readonly where: string;
  readonly name: string | undefined;
  /** The path item, references inlined. */
  readonly item: Json;
  /** The operation as written (references not inlined): its x-gateway. */
  readonly raw: Json;
  readonly extension: GatewayExtension;
}

/**
 * The gateway's own paths. The catalogue's routes are tried first and Express matches paths case-insensitively
 * with an optional trailing slash, so an operation there would take the probes, metrics, the document or the
 * session endpoints (a liveness probe that needs an API key restarts every replica).
 */
const GATEWAY_PATHS = ['/healthz', '/readyz', '/metrics', '/openapi.json', '/bff'] as const;

function isGatewayPath(path: string): boolean {
  const first = `/${path.split('/')[1] ?? ''}`.toLowerCase();
  return (GATEWAY_PATHS as readonly string[]).includes(first);
}

function compileOperation(
  source: OperationSource,
  options: CatalogueOptions,
  compilers: ReturnType<typeof createCompilers>,
  problems: string[],
): CatalogueOperation | undefined {
  const { path, method, where, name, extension } = source;
  const before = problems.length;
  const operation = source.item[method.toLowerCase()] as Json;
  if (!name || !OPERATION_ID.test(name))
    problems.push(
      `${where}: operationId must be letters, digits, _ . - (at most 64), starting with a letter`,
    );
  const own = parsePathTemplate(path);
  if (typeof own === 'string') problems.push(`${where}: the path ${own}`);
  else if (isGatewayPath(path))
    problems.push(`${where}: the path belongs to the gateway (${GATEWAY_PATHS.join(', ')})`);
  const upstreamTemplate = extension.upstream?.path ?? path;
  const upstream = parsePathTemplate(upstreamTemplate);
  if (typeof upstream === 'string') problems.push(`${where}: x-gateway.upstream.path ${upstream}`);
  if (extension.cache && method !== 'GET')
    problems.push(`${where}: x-gateway.cache is for GET operations only`);
  if (extension.idempotency && extension.idempotency !== 'none' && method === 'GET')
    problems.push(`${where}: x-gateway.idempotency is for methods other than GET`);
  if (extension.answer === 'stream') problems.push(...streamProblems(extension, where));
  if (extension.timeoutMs !== undefined && extension.timeoutMs > options.maxTimeoutMs)
    problems.push(
      `${where}: x-gateway.timeoutMs must be at most UPSTREAM_TIMEOUT_MS (${options.maxTimeoutMs})`,
    );

  const { pathParams, query } = parameters(source, operation, problems);
  if (typeof own !== 'string') {
    for (const param of own.params) {
      if (!PATH_PARAM_NAME.test(param))
        problems.push(`${where}: path parameter {${param}} must be a plain name`);
      if (!pathParams.has(param))
        problems.push(`${where}: path parameter {${param}} has no schema in parameters`);
    }
    for (const param of pathParams.keys())
      if (!own.params.includes(param))
        problems.push(`${where}: parameter ${param} (in: path) is not in the path`);
  }
  if (typeof upstream !== 'string' && extension.upstream)
    for (const param of upstream.params)
      if (!pathParams.has(param))
        problems.push(
          `${where}: x-gateway.upstream.path uses {${param}}, not a path parameter of the operation`,
        );

  const body = requestBodySchema(operation, where, problems);
  const responses = successSchemas(operation);
  if (problems.length > before || typeof upstream === 'string' || !name) return undefined;
  try {
    const answer = extension.answer ?? 'strict';
    return {
      id: name,
      method,
      path,
      route: expressPath(path),
      scope: extension.scope as string,
      answer,
      cacheTtlSeconds: extension.cache?.ttlSeconds,
      idempotency: extension.idempotency ?? 'none',
      forwardIdempotencyKey: extension.forwardIdempotencyKey ?? false,
      timeoutMs: extension.timeoutMs,
      hasBody: body !== undefined,
      request: compileRequestValidator({ pathParams, query, body, upstream }, compilers),
      filterAnswer: answer === 'strict' ? compileAnswerFilter(responses) : undefined,
      answerVersion: sha256Hex(JSON.stringify([ANSWER_RULES_REVISION, answer, [...responses]])).slice(0, 12),
    };
  } catch (error) {
    problems.push(`${where}: a schema does not compile: ${(error as Error).message}`);
    return undefined;
  }
}

/** A streamed answer is never read, so it can be neither kept (cache) nor replayed (an idempotency record). */
function streamProblems(extension: GatewayExtension, where: string): string[] {
  const problems: string[] = [];
  if (extension.cache)
    problems.push(
      `${where}: x-gateway.answer "stream" cannot be cached (x-gateway.cache): a streamed answer is never kept`,
    );
  if (extension.idempotency && extension.idempotency !== 'none')
    problems.push(
      `${where}: x-gateway.answer "stream" needs x-gateway.idempotency "none": a streamed answer cannot be kept for a replay`,
    );
  return problems;
}

/** Path and query parameters of the path item and the operation (the operation's win), each with its schema. */
function parameters(source: OperationSource, operation: Json, problems: string[]) {
  const { where } = source;
  const all = new Map<string, Json>();
  for (const list of [source.item.parameters, operation.parameters]) {
    if (list === undefined) continue;
    if (!Array.isArray(list)) {
      problems.push(`${where}: parameters must be a list`);
      continue;
    }
    for (const parameter of list) {
      if (!isRecord(parameter) || typeof parameter.name !== 'string' || typeof parameter.in !== 'string') {
        problems.push(`${where}: each parameter needs a name and an in`);
        continue;
      }
      all.set(`${parameter.in}:${parameter.name}`, parameter);
    }
  }
  const pathParams = new Map<string, Record<string, unknown>>();
  const query: QueryParameter[] = [];
  for (const parameter of all.values()) {
    const { name, in: location, schema } = parameter as { name: string; in: string; schema: unknown };
    if (location !== 'path' && location !== 'query') continue; // headers and cookies are never forwarded
    if (!isRecord(schema)) {
      problems.push(`${where}: parameter ${name} (in: ${location}) has no schema`);
      continue;
    }
    if (location === 'path') pathParams.set(name, schema);
    else query.push({ name, required: parameter.required === true, schema });
  }
  return { pathParams, query };
}

function requestBodySchema(operation: Json, where: string, problems: string[]): Json | undefined {
  const body = operation.requestBody;
  if (body === undefined) return undefined;
  const schema =
    isRecord(body) && isRecord(body.content) && isRecord(body.content['application/json'])
      ? body.content['application/json'].schema
      : undefined;
  if (!isRecord(schema)) {
    problems.push(
      `${where}: requestBody needs content.application/json.schema (the gateway forwards JSON only)`,
    );
    return undefined;
  }
  return schema;
}

/**
 * The revision of what the gateway does with a strict answer (answer-filter.ts): part of every answer version, so a
 * gateway whose filter reads the same schema differently keeps its answers apart. Raise it with such a change.
 */
const ANSWER_RULES_REVISION = 3;

/**
 * The operation's 2xx responses: status → the JSON schema its answers are filtered by, or null when the status is
 * documented without one (a `202` with a description only: its answers declare nothing). `default` speaks for the
 * 2xx of an operation that documents none (OpenAPI reads it so for every unlisted status; where a 2xx is listed,
 * `default` is mostly the error schema, often open, and an unlisted 2xx answers `{}` instead).
 */
function successSchemas(operation: Json): Map<string, unknown> {
  const schemas = new Map<string, unknown>();
  if (!isRecord(operation.responses)) return schemas;
  for (const [status, response] of Object.entries(operation.responses))
    if (/^2(\d\d|XX)$/i.test(status) && isRecord(response)) schemas.set(status, jsonSchemaOf(response));
  const fallback = operation.responses.default;
  if (schemas.size === 0 && isRecord(fallback)) schemas.set('2XX', jsonSchemaOf(fallback));
  return schemas;
}

/** A response's JSON schema: of a JSON media type, else of a wildcard one (all types, as some generators write); or null. */
export function jsonSchemaOf(response: Json): unknown {
  const content = isRecord(response.content) ? Object.entries(response.content) : [];
  const json = (content.find(([type]) => /json/i.test(type)) ??
    content.find(([type]) => type === '*/*' || type === 'application/*'))?.[1];
  return isRecord(json) && isRecord(json.schema) ? json.schema : null;
}

function withoutGatewayKeys(value: unknown, depth = 0): Json {
  const out: Json = {};
  if (!isRecord(value) || depth > 64) return out;
  for (const [key, inner] of Object.entries(value)) {
    if (key === 'x-gateway') continue;
    out[key] = isRecord(inner)
      ? withoutGatewayKeys(inner, depth + 1)
      : Array.isArray(inner)
        ? inner.map((item) => (isRecord(item) ? withoutGatewayKeys(item, depth + 1) : item))
        : inner;
  }
  return out;
}

/**
 * A path item as /openapi.json publishes it: its served operations without the gateway's extension; operations
 * nobody is served (no x-gateway scope) left out.
 */
function withoutExtension(item: Json): Json | undefined {
  const out: Json = {};
  let served = false;
  for (const [key, value] of Object.entries(item)) {
    if (!METHODS.includes(key.toUpperCase() as OperationMethod)) {
      out[key] = value;
      continue;
    }
    if (!isRecord(value) || !isRecord(value['x-gateway']) || value['x-gateway'].scope === undefined) continue;
    const { 'x-gateway': _gateway, ...rest } = value;
    out[key] = rest;
    served = true;
  }
  return served ? out : undefined;
}
