// `answer: strict` (SPEC §12): a 2xx JSON answer keeps only the properties its documented response schema declares,
// at every depth, so a field the provider adds tomorrow reaches no caller until someone documents it. Compiled once
// per load into small functions; an answer with nothing to drop keeps its bytes (no re-serialization).

type Schema = Record<string, unknown>;
/** Drops undeclared properties in place; true when it dropped any. */
type Pruner = (value: unknown) => boolean;

/** The answer as the filter sees it (the forwarder's buffered UpstreamAnswer). */
export interface FilterableAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export type AnswerFilter = <A extends FilterableAnswer>(answer: A) => A;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The filter of an operation's 2xx responses (status → inlined JSON schema); undefined when none is documented. */
export function compileAnswerFilter(schemas: ReadonlyMap<string, unknown>): AnswerFilter | undefined {
  const pruners = new Map<string, Pruner | undefined>();
  for (const [status, schema] of schemas) pruners.set(status.toUpperCase(), pruner(schema, 0));
  if (pruners.size === 0) return undefined;
  return (answer) => {
    if (answer.status < 200 || answer.status > 299 || answer.body.length === 0) return answer;
    const prune = pruners.has(String(answer.status))
      ? pruners.get(String(answer.status))
      : pruners.get('2XX');
    if (!prune || !/json/i.test(answer.headers['content-type'] ?? 'application/json')) return answer;
    let value: unknown;
    try {
      value = JSON.parse(answer.body.toString('utf8'));
    } catch {
      return answer; // Not JSON after all: nothing the schema can speak for (documented in docs/catalogue.md).
    }
    if (!prune(value)) return answer;
    return { ...answer, body: Buffer.from(JSON.stringify(value)) };
  };
}

/**
 * The properties a schema declares, with those of its allOf/anyOf/oneOf branches (a union: any may apply). `open`
 * is explicit (additionalProperties, or a branch that admits any object); a branch that is not an object schema
 * (`{type: 'null'}` of a nullable object, a `description` beside a $ref) neither declares nor opens anything.
 */
function declared(
  schema: Schema,
  depth: number,
): { keys: Map<string, unknown[]>; open: boolean; any: boolean } {
  const keys = new Map<string, unknown[]>();
  let open = schema.additionalProperties === true || isRecord(schema.additionalProperties);
  let any = isRecord(schema.properties);
  if (isRecord(schema.properties))
    for (const [key, value] of Object.entries(schema.properties)) keys.set(key, [value]);
  for (const branch of ['allOf', 'anyOf', 'oneOf'] as const) {
    const list = schema[branch];
    if (!Array.isArray(list) || depth > 32) continue;
    for (const item of list) {
      if (!isRecord(item)) continue;
      const inner = declared(item, depth + 1);
      if (inner.open) open = true;
      if (inner.any) any = true;
      else if (admitsObjects(item)) open = true; // `{type: object}` with no properties: keeps what comes.
      for (const [key, values] of inner.keys) keys.set(key, [...(keys.get(key) ?? []), ...values]);
    }
  }
  return { keys, open, any };
}

function admitsObjects(schema: Schema): boolean {
  return admitsType(schema, 'object');
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
 * The array schemas among a schema and its allOf/anyOf/oneOf branches (a union, as for objects): a nullable array
 * written `anyOf: [{type: array, items}, {type: null}]` is filtered like a plain one. A branch that is no array schema
 * (`{type: 'null'}`, a `description`) has no say over elements.
 */
function arrayShapes(schema: Schema, depth: number): ArrayShape[] {
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
  const shapes: ArrayShape[] =
    schema.items !== undefined || prefix.length > 0 || admitsType(schema, 'array')
      ? [{ prefix, items: schema.items }]
      : [];
  if (depth > 32) return shapes;
  for (const branch of ['allOf', 'anyOf', 'oneOf'] as const) {
    const list = schema[branch];
    if (Array.isArray(list))
      for (const item of list) if (isRecord(item)) shapes.push(...arrayShapes(item, depth + 1));
  }
  return shapes;
}

/** The pruner of the element at `index`: the union of what every array shape says of it; none if one says nothing. */
function elementPruner(shapes: readonly ArrayShape[], index: number, depth: number): Pruner | undefined {
  const schemas: unknown[] = [];
  for (const shape of shapes) {
    const schema = index < shape.prefix.length ? shape.prefix[index] : shape.items;
    if (schema === undefined || schema === true) return undefined; // this shape admits any element here
    if (schema !== false) schemas.push(schema);
  }
  if (schemas.length === 0) return undefined;
  return schemas.length === 1 ? pruner(schemas[0], depth + 1) : pruner({ anyOf: schemas }, depth + 1);
}

function pruner(schema: unknown, depth: number): Pruner | undefined {
  if (!isRecord(schema) || depth > 32) return undefined;
  const arrays = arrayShapes(schema, depth);
  const width = Math.max(0, ...arrays.map((a) => a.prefix.length));
  const byPosition = Array.from({ length: width }, (_, index) => elementPruner(arrays, index, depth));
  const rest = arrays.length > 0 ? elementPruner(arrays, width, depth) : undefined;
  const elements = rest !== undefined || byPosition.some((p) => p !== undefined);
  const shape = declared(schema, depth);
  const keys = shape.keys;
  // An object schema that declares no properties at all documents nothing to filter by: it keeps what comes.
  const open = shape.open || !shape.any;
  const extra = isRecord(schema.additionalProperties)
    ? pruner(schema.additionalProperties, depth + 1)
    : undefined;
  const nested = new Map<string, Pruner>();
  for (const [key, schemas] of keys) {
    const inner =
      schemas.length === 1 ? pruner(schemas[0], depth + 1) : pruner({ anyOf: schemas }, depth + 1);
    if (inner) nested.set(key, inner);
  }
  if (open && nested.size === 0 && !extra && !elements) return undefined;
  return (value) => {
    let dropped = false;
    if (Array.isArray(value)) {
      if (!elements) return false;
      for (let i = 0; i < value.length; i++)
        if ((i < width ? byPosition[i] : rest)?.(value[i])) dropped = true;
      return dropped;
    }
    if (!isRecord(value)) return false;
    for (const key of Object.keys(value)) {
      const inner = nested.get(key);
      if (inner) {
        if (inner(value[key])) dropped = true;
      } else if (!keys.has(key)) {
        if (!open) {
          delete value[key];
          dropped = true;
        } else if (extra?.(value[key])) dropped = true;
      }
    }
    return dropped;
  };
}
