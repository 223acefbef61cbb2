// `answer: strict` (SPEC §12): a 2xx JSON answer keeps only the properties its documented response schema declares,
// at every depth, so a field the provider adds tomorrow reaches no caller until someone documents it. Compiled once
// per load into small functions. A filtered answer is always written anew from what was kept (a duplicate key's
// earlier copy never passes as the provider's bytes), its numbers as the provider wrote them.
import { GatewayError } from '../../http/gateway-error';
import { compileKeyPattern, keyMatches } from './key-patterns';
import { isJsonRecord, parseProviderJson } from './provider-json';

type Schema = Record<string, unknown>;
/** Drops undeclared properties in place. */
type Pruner = (value: unknown) => void;

/** The answer as the filter sees it (the forwarder's buffered UpstreamAnswer). */
export interface FilterableAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export type AnswerFilter = <A extends FilterableAnswer>(answer: A) => A;

/** How deep a response schema may nest (objects, arrays, branches): deeper is refused at load, never left open. */
export const MAX_SCHEMA_DEPTH = 64;

/** What a documented status says of its answers: filtered (a pruner), kept as they come (undefined), or nothing. */
type AnswerRule = Pruner | undefined | 'nothing';
/** The body of a success whose schema declares nothing: the status passes, none of the provider's body does. */
const NOTHING_DECLARED = Buffer.from('{}');

/**
 * The filter of an operation's 2xx responses: status → inlined JSON schema, or null for a status documented without
 * one (a `202` with a description only). A success documented without a schema, or not documented at all (a `201`
 * where only `200` is, with no `2XX`), declares nothing: its JSON body becomes `{}`, the status passes (the provider
 * did what was asked: a refusal would read as a failure and invite a retry of a payment).
 */
export function compileAnswerFilter(schemas: ReadonlyMap<string, unknown>): AnswerFilter {
  const rules = new Map<string, AnswerRule>();
  for (const [status, schema] of schemas)
    rules.set(status.toUpperCase(), schema === null ? 'nothing' : pruner(schema, 0));
  return (answer) => {
    if (answer.status < 200 || answer.status > 299 || answer.body.length === 0) return answer;
    if (!/json/i.test(answer.headers['content-type'] ?? 'application/json')) return answer;
    const status = String(answer.status);
    const rule = rules.has(status) ? rules.get(status) : rules.has('2XX') ? rules.get('2XX') : 'nothing';
    if (rule === 'nothing') return { ...answer, body: NOTHING_DECLARED };
    if (!rule) return answer;
    // Labelled JSON but not JSON (cut, trailing text a lenient reader would skip), or nested past what the stack
    // holds: neither filtered nor passed on. A gateway error, so a keyed request keeps this answer for its retries
    // (the provider did answer) instead of releasing its key.
    try {
      const value = parseProviderJson(answer.body);
      rule(value);
      return { ...answer, body: Buffer.from(JSON.stringify(value)) };
    } catch {
      throw new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream answer could not be filtered.');
    }
  };
}

/** Past MAX_SCHEMA_DEPTH: the load fails (load-catalogue reports it as a schema that does not compile). */
function tooDeep(depth: number): void {
  if (depth > MAX_SCHEMA_DEPTH)
    throw new Error(`a response schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`);
}

interface ObjectShape {
  /** Every declared key, with the schemas that speak for it (several: a union of branches). */
  readonly keys: Map<string, unknown[]>;
  /** Keys outside `keys` are kept (additionalProperties, a branch that admits any object). */
  open: boolean;
  /** The schema (or a branch) declares its properties, even none (`properties: {}`, `additionalProperties: false`). */
  any: boolean;
  /** additionalProperties / unevaluatedProperties schemas, of the schema and its branches: for undeclared keys. */
  readonly extras: unknown[];
  /** patternProperties: a key matching one is declared, with that schema. */
  readonly patterns: [RegExp, unknown][];
}

/**
 * The properties a schema declares, with those of its allOf/anyOf/oneOf branches (a union: any may apply). `open`
 * is explicit (additionalProperties, or an anyOf/oneOf branch that admits any object: the value may be that one); a
 * branch that is not an object schema (`{type: 'null'}` of a nullable object, a `description` beside a $ref)
 * neither declares nor opens anything, nor does an allOf branch without properties (`{type: object, required}`: the
 * other branches still apply).
 */
function declared(schema: Schema, depth: number): ObjectShape {
  tooDeep(depth);
  const { additionalProperties: additional, unevaluatedProperties: unevaluated } = schema;
  const shape: ObjectShape = {
    keys: new Map(),
    open:
      additional === true || isJsonRecord(additional) || unevaluated === true || isJsonRecord(unevaluated),
    any: isJsonRecord(schema.properties) || additional === false || unevaluated === false,
    extras: [additional, unevaluated].filter(isJsonRecord),
    patterns: [],
  };
  if (isJsonRecord(schema.properties))
    for (const [key, value] of Object.entries(schema.properties)) shape.keys.set(key, [value]);
  if (isJsonRecord(schema.patternProperties)) {
    shape.any = true;
    for (const [pattern, value] of Object.entries(schema.patternProperties))
      shape.patterns.push([compileKeyPattern(pattern), value]);
  }
  for (const [keyword, item] of branchesOf(schema)) {
    const inner = declared(item, depth + 1);
    if (inner.open) shape.open = true;
    if (inner.any) shape.any = true;
    else if (keyword !== 'allOf' && admitsType(item, 'object')) shape.open = true; // keeps what comes
    shape.extras.push(...inner.extras);
    shape.patterns.push(...inner.patterns);
    for (const [key, values] of inner.keys) shape.keys.set(key, [...(shape.keys.get(key) ?? []), ...values]);
  }
  return shape;
}

/**
 * The sub-schemas that may declare an object's properties, with the keyword each comes from: allOf (all apply),
 * anyOf / oneOf, and if/then/else and dependentSchemas (any may apply: read as a union, as anyOf is).
 */
function branchesOf(schema: Schema): [string, Schema][] {
  const branches: [string, Schema][] = [];
  for (const keyword of ['allOf', 'anyOf', 'oneOf'] as const) {
    const list = schema[keyword];
    if (Array.isArray(list)) for (const item of list) if (isJsonRecord(item)) branches.push([keyword, item]);
  }
  for (const keyword of ['then', 'else'] as const) {
    const item = schema[keyword];
    if (isJsonRecord(item)) branches.push([keyword, item]);
  }
  if (isJsonRecord(schema.dependentSchemas))
    for (const item of Object.values(schema.dependentSchemas))
      if (isJsonRecord(item)) branches.push(['dependentSchemas', item]);
  return branches;
}

function admitsType(schema: Schema, type: string): boolean {
  return schema.type === type || (Array.isArray(schema.type) && schema.type.includes(type));
}

/** An array schema as its elements see it: `prefixItems` by position, `items` for the rest (undefined: anything). */
interface ArrayShape {
  readonly prefix: readonly unknown[];
  readonly items: unknown;
}

/**
 * The array schemas among a schema and its branches (branchesOf: a union, as for objects): a nullable array written
 * `anyOf: [{type: array, items}, {type: null}]` is filtered like a plain one. A branch that is no array schema
 * (`{type: 'null'}`, a `description`) has no say over elements.
 */
function arrayShapes(schema: Schema, depth: number): ArrayShape[] {
  tooDeep(depth);
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
  const shapes: ArrayShape[] =
    schema.items !== undefined || prefix.length > 0 || admitsType(schema, 'array')
      ? [{ prefix, items: schema.items }]
      : [];
  for (const [, item] of branchesOf(schema)) shapes.push(...arrayShapes(item, depth + 1));
  return shapes;
}

/** What becomes of an element at a position: filtered (a pruner), kept as it comes (undefined), or dropped. */
type ElementRule = Pruner | undefined | 'drop';

/**
 * The rule of the element at `index`: the union of what every array shape says of it; kept as it comes when one
 * shape says nothing; dropped when every shape refuses it (`items: false` past `prefixItems`).
 */
function elementRule(shapes: readonly ArrayShape[], index: number, depth: number): ElementRule {
  const schemas: unknown[] = [];
  for (const shape of shapes) {
    const schema = index < shape.prefix.length ? shape.prefix[index] : shape.items;
    if (schema === undefined || schema === true) return undefined; // this shape admits any element here
    if (schema !== false) schemas.push(schema);
  }
  if (schemas.length === 0) return 'drop';
  return union(schemas, depth + 1);
}

function union(schemas: readonly unknown[], depth: number): Pruner | undefined {
  return schemas.length === 1 ? pruner(schemas[0], depth) : pruner({ anyOf: schemas }, depth);
}

/** Filters an array's elements by position; elements past the last one a shape admits are cut off. */
function elementsPruner(arrays: readonly ArrayShape[], depth: number): Pruner | undefined {
  if (arrays.length === 0) return undefined;
  const width = Math.max(0, ...arrays.map((a) => a.prefix.length));
  const byPosition = Array.from({ length: width }, (_, index) => elementRule(arrays, index, depth));
  const rest = elementRule(arrays, width, depth);
  if (rest === undefined && byPosition.every((rule) => rule === undefined)) return undefined;
  return (value) => {
    const list = value as unknown[];
    if (rest === 'drop' && list.length > width) list.length = width;
    for (let i = 0; i < list.length; i++) {
      const rule = i < width ? byPosition[i] : rest;
      if (typeof rule === 'function') rule(list[i]);
    }
  };
}

function pruner(schema: unknown, depth: number): Pruner | undefined {
  tooDeep(depth);
  if (!isJsonRecord(schema)) return undefined;
  const arrays = arrayShapes(schema, depth);
  const elements = elementsPruner(arrays, depth);
  const shape = declared(schema, depth);
  // Only an array is documented (`{type: array, items}`, a list of strings): an object in its place declares nothing.
  const arrayOnly = arrays.length > 0 && !shape.any && !shape.open && !admitsType(schema, 'object');
  // Only a scalar is documented (`{type: string}`): an object or a list in its place declares nothing either.
  const scalarOnly =
    schema.type !== undefined &&
    arrays.length === 0 &&
    !shape.any &&
    !shape.open &&
    !admitsType(schema, 'object') &&
    !admitsType(schema, 'array');
  const keepsNoKeys = arrayOnly || scalarOnly;
  // An object schema that declares no properties at all documents nothing to filter by: it keeps what comes.
  const open = shape.open || !shape.any;
  const extra = shape.extras.length > 0 ? union(shape.extras, depth + 1) : undefined;
  const nested = new Map<string, Pruner>();
  // `pan: false` in every schema that names it: the document forbids it, so it never passes, open object or not.
  const forbidden = new Set<string>();
  for (const [key, schemas] of shape.keys) {
    if (schemas.every((s) => s === false)) {
      forbidden.add(key);
      continue;
    }
    const inner = union(schemas, depth + 1);
    if (inner) nested.set(key, inner);
  }
  for (const key of forbidden) shape.keys.delete(key);
  const patterns = shape.patterns.map(([pattern, value]): [RegExp, Pruner | undefined] => [
    pattern,
    pruner(value, depth + 1),
  ]);
  const filters = nested.size > 0 || extra || elements || forbidden.size > 0 || patterns.length > 0;
  if (open && !filters && !keepsNoKeys) return undefined;
  const prune: Pruner = (value) => {
    if (Array.isArray(value)) {
      if (scalarOnly) {
        value.length = 0;
        return;
      }
      // An array where the schema documents no array (an object documented, a list answered): each element is held
      // to the object's rules, never passed whole. Where it documents one, its element rules (none: kept as they come).
      if (elements) elements(value);
      else if (arrays.length === 0) for (const item of value) prune(item);
      return;
    }
    if (!isJsonRecord(value)) return;
    for (const key of Object.keys(value)) {
      if (keepsNoKeys) {
        delete value[key];
        continue;
      }
      const inner = nested.get(key);
      if (inner) inner(value[key]);
      else if (forbidden.has(key)) delete value[key];
      else if (!shape.keys.has(key) && !byPattern(patterns, key, value[key])) {
        if (open) extra?.(value[key]);
        else delete value[key];
      }
    }
  };
  return prune;
}

/** Whether `key` matches a patternProperties pattern; the value is filtered by each matching one's schema. */
function byPattern(patterns: readonly [RegExp, Pruner | undefined][], key: string, value: unknown): boolean {
  let matched = false;
  for (const [pattern, prune] of patterns)
    if (keyMatches(pattern, key)) {
      matched = true;
      prune?.(value);
    }
  return matched;
}
