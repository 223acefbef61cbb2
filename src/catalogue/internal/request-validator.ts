// Request validation compiled from an operation's parameters and JSON body (JSON Schema 2020-12, ajv), once per
// load: path and query parameters checked (and coerced from text), unknown body properties dropped at every depth
// unless the schema says `additionalProperties: false` (then refused), the upstream path and query built.
import type { ErrorObject, ValidateFunction } from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { GatewayError } from '../../http/gateway-error';
import type { UpstreamPath } from './upstream-path';

type Schema = Record<string, unknown>;

/** The compilers of one load: one instance each, dropped with the catalogue (ajv keeps what it compiled). */
export interface Compilers {
  readonly body: Ajv2020;
  readonly params: Ajv2020;
}

export function createCompilers(): Compilers {
  // strict off: OpenAPI schemas carry `example`, `x-…` and other annotations ajv does not know.
  const common = { allErrors: true, strict: false, verbose: true, allowUnionTypes: true } as const;
  const body = new Ajv2020({ ...common, removeAdditional: true });
  const params = new Ajv2020({ ...common, coerceTypes: true });
  addFormats(body);
  addFormats(params);
  return { body, params };
}

/** What reaches the provider for a valid request. */
export interface ValidRequest {
  /** Path and query for the provider. */
  readonly path: string;
  /** The sanitized body, when the operation has one. */
  readonly body?: unknown;
}

export interface RequestValidator {
  /** Throws 400 INVALID_REQUEST naming each bad field; never mutates what the caller sees but the body. */
  validate(
    params: Readonly<Record<string, unknown>>,
    rawQuery: string | undefined,
    body: unknown,
  ): ValidRequest;
}

export interface QueryParameter {
  readonly name: string;
  readonly required: boolean;
  readonly schema: Schema;
}

export interface RequestShape {
  readonly pathParams: ReadonlyMap<string, Schema>;
  readonly query: readonly QueryParameter[];
  readonly body?: Schema;
  readonly upstream: UpstreamPath;
}

const MAX_ERRORS = 20;

export function compileRequestValidator(shape: RequestShape, compilers: Compilers): RequestValidator {
  const pathNames = [...shape.pathParams.keys()];
  const checkPath = compilers.params.compile(
    objectOf(Object.fromEntries(shape.pathParams), pathNames),
  ) as ValidateFunction;
  // UUIDs are case-insensitive: one spelling upstream (and one cache key) per id.
  const lowerCased = pathNames.filter((name) => shape.pathParams.get(name)?.format === 'uuid');
  const queryNames = shape.query.map((parameter) => parameter.name);
  const queryArrays = new Set(shape.query.filter((q) => isArraySchema(q.schema)).map((q) => q.name));
  const checkQuery =
    shape.query.length > 0
      ? (compilers.params.compile(
          objectOf(
            Object.fromEntries(shape.query.map((q) => [q.name, q.schema])),
            shape.query.filter((q) => q.required).map((q) => q.name),
          ),
        ) as ValidateFunction)
      : undefined;
  const checkBody = shape.body
    ? (compilers.body.compile(strippable(shape.body, false)) as ValidateFunction)
    : undefined;

  return {
    validate(params, rawQuery, body) {
      const values: Record<string, unknown> = {};
      for (const name of pathNames) values[name] = params[name];
      if (!checkPath(values)) throw invalid('path parameters', checkPath.errors);
      for (const name of pathNames) {
        const value = String(values[name]);
        // One segment upstream, whatever the provider decodes: no dot segment, no (encoded) slash or backslash.
        if (value === '.' || value === '..' || value.includes('/') || value.includes('\\'))
          throw invalid('path parameters', undefined, [
            { path: name, message: 'must be one path segment (no /, \\, . or ..)' },
          ]);
      }
      for (const name of lowerCased) values[name] = String(values[name]).toLowerCase();
      let path = shape.upstream.fill(values);
      if (checkQuery) {
        const query = pickQuery(rawQuery, queryNames, queryArrays);
        if (!checkQuery(query)) throw invalid('query parameters', checkQuery.errors);
        const search = serializeQuery(query, queryNames);
        if (search) path += `?${search}`;
      }
      if (!checkBody) return { path };
      if (!checkBody(body)) throw invalid('request body', checkBody.errors);
      return { path, body };
    },
  };
}

function objectOf(properties: Record<string, unknown>, required: readonly string[]): Schema {
  return { type: 'object', properties, required };
}

function isArraySchema(schema: Schema): boolean {
  return schema.type === 'array' || (Array.isArray(schema.type) && schema.type.includes('array'));
}

/** Only the declared names, from the raw query (the app parses none): the first value, or all for an array. */
function pickQuery(
  rawQuery: string | undefined,
  names: readonly string[],
  arrays: ReadonlySet<string>,
): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  if (!rawQuery) return query;
  const search = new URLSearchParams(rawQuery);
  for (const name of names) {
    if (!search.has(name)) continue;
    query[name] = arrays.has(name) ? search.getAll(name) : search.get(name);
  }
  return query;
}

function serializeQuery(query: Record<string, unknown>, names: readonly string[]): string {
  const search = new URLSearchParams();
  for (const name of names) {
    const value = query[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) search.append(name, String(item));
    else search.append(name, typeof value === 'object' ? JSON.stringify(value) : String(value));
  }
  return search.toString();
}

/**
 * The schema as validation runs it: an object schema that lists `properties` and says nothing of others gets
 * `additionalProperties: false`, which ajv's `removeAdditional` turns into dropping them; an explicit
 * `additionalProperties: false` becomes `unevaluatedProperties: false`, which refuses them. Inside
 * allOf/anyOf/oneOf/not/if nothing is injected: a branch must not drop what its siblings declare.
 */
export function strippable(schema: unknown, inComposition: boolean): Schema {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return schema as Schema;
  const out: Schema = { ...(schema as Schema) };
  const mapEach = (value: unknown, composed: boolean) =>
    Array.isArray(value) ? value.map((item) => strippable(item, composed)) : strippable(value, composed);
  if (isRecord(out.properties))
    out.properties = Object.fromEntries(
      Object.entries(out.properties).map(([key, value]) => [key, strippable(value, false)]),
    );
  for (const key of ['items', 'prefixItems', 'contains'] as const)
    if (out[key] !== undefined) out[key] = mapEach(out[key], false);
  if (isRecord(out.additionalProperties))
    out.additionalProperties = strippable(out.additionalProperties, false);
  for (const key of ['allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else'] as const)
    if (out[key] !== undefined) out[key] = mapEach(out[key], true);
  const composed = out.allOf !== undefined || out.anyOf !== undefined || out.oneOf !== undefined;
  if (out.additionalProperties === false) {
    delete out.additionalProperties;
    out.unevaluatedProperties = false;
  } else if (
    !inComposition &&
    !composed &&
    isRecord(out.properties) &&
    out.additionalProperties === undefined &&
    out.patternProperties === undefined &&
    out.unevaluatedProperties === undefined
  ) {
    out.additionalProperties = false;
  }
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

interface FieldError {
  readonly path: string;
  readonly message: string;
}

function invalid(
  what: string,
  errors: readonly ErrorObject[] | null | undefined,
  extra: readonly FieldError[] = [],
): GatewayError {
  return new GatewayError('INVALID_REQUEST', `The ${what} ${what.endsWith('s') ? 'are' : 'is'} invalid.`, {
    errors: [...extra, ...fieldErrors(errors ?? [])].slice(0, MAX_ERRORS),
  });
}

/** One error per field (the first ajv found), each as `a.b.c` and a sentence; `x-messages` in a schema words them. */
export function fieldErrors(errors: readonly ErrorObject[]): FieldError[] {
  const byPath = new Map<string, string>();
  for (const error of errors) {
    const { path, message } = fieldError(error);
    if (!byPath.has(path)) byPath.set(path, message);
  }
  return [...byPath].map(([path, message]) => ({ path, message }));
}

function fieldError(error: ErrorObject): FieldError {
  const base = error.instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'));
  const parent = (error.parentSchema ?? {}) as Schema;
  const messages = (schema: unknown): Record<string, string> | undefined =>
    isRecord(schema) && isRecord(schema['x-messages'])
      ? (schema['x-messages'] as Record<string, string>)
      : undefined;
  if (error.keyword === 'required') {
    const missing = String((error.params as { missingProperty: string }).missingProperty);
    const property = isRecord(parent.properties) ? parent.properties[missing] : undefined;
    const type = isRecord(property) ? property.type : undefined;
    const message =
      messages(property)?.required ?? (typeof type === 'string' ? `expected ${type}` : 'is required');
    return { path: [...base, missing].join('.'), message };
  }
  if (error.keyword === 'unevaluatedProperties') {
    const extra = String((error.params as { unevaluatedProperty: string }).unevaluatedProperty);
    return { path: [...base, extra].join('.'), message: 'is not allowed' };
  }
  const custom = messages(parent)?.[error.keyword];
  if (custom) return { path: base.join('.'), message: custom };
  if (error.keyword === 'type')
    return { path: base.join('.'), message: `expected ${String((error.params as { type: unknown }).type)}` };
  return { path: base.join('.'), message: error.message ?? 'is invalid' };
}
