// Local `$ref`s of the catalogue: every one must point inside the document, at something; schemas are compiled from
// a copy with the references replaced by what they point at (recursive references are refused).

type Json = unknown;

function isObject(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The value a local reference (`#/components/schemas/Plan`) points at, or undefined. */
function pointAt(document: Json, ref: string): Json {
  if (ref === '#') return document;
  if (!ref.startsWith('#/')) return undefined;
  let node: Json = document;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (Array.isArray(node) && /^\d+$/.test(key)) node = node[Number(key)];
    else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
    else return undefined;
  }
  return node;
}

/** Every `$ref` of the document that leaves it or points nowhere, as a sentence naming where it is. */
export function badReferences(document: Json): string[] {
  const problems: string[] = [];
  // Deeper than any schema the filter compiles (MAX_SCHEMA_DEPTH levels of schema are several more of JSON). Each
  // object is read once: a YAML alias shared by two places, or one that contains itself (inlineReferences names it).
  const within = new Set<object>();
  const walk = (node: Json, where: string, depth: number) => {
    if (depth > 512 || (typeof node === 'object' && node !== null && within.has(node))) return;
    if (typeof node === 'object' && node !== null) within.add(node);
    if (Array.isArray(node)) {
      for (const [i, item] of node.entries()) walk(item, `${where}/${i}`, depth + 1);
    }
    if (!isObject(node)) return;
    for (const dynamic of ['$dynamicRef', '$recursiveRef'])
      if (node[dynamic] !== undefined)
        problems.push(`${where}: ${dynamic} is not supported: write the schema with local $refs (#/…)`);
    const ref = node.$ref;
    if (ref !== undefined) {
      if (typeof ref !== 'string' || !ref.startsWith('#'))
        problems.push(
          `${where}: $ref ${JSON.stringify(ref)} leaves the document (only local references, #/…)`,
        );
      else if (pointAt(document, ref) === undefined)
        problems.push(`${where}: $ref ${JSON.stringify(ref)} points nowhere`);
    }
    for (const [key, value] of Object.entries(node)) walk(value, `${where}/${key}`, depth + 1);
  };
  walk(document, '#', 0);
  return problems;
}

export class RecursiveReferenceError extends Error {}

/**
 * What a `$ref` and its siblings become: the target with the siblings merged over it, as before OpenAPI 3.1 gave
 * siblings a meaning, except where both name the same list of constraints, which the sibling adds to instead of
 * replacing (its `allOf` joins the target's, its `properties` and `required` join the target's): a sibling can
 * refine what the target declares, never wipe it. Parameters, request bodies and responses keep their fields as they
 * were (a `required: true` or a `description` beside their `$ref`).
 */
function mergedOver(target: Record<string, Json>, own: Record<string, Json>): Record<string, Json> {
  const merged = { ...target, ...own };
  if (Array.isArray(target.allOf) && Array.isArray(own.allOf)) merged.allOf = [...target.allOf, ...own.allOf];
  if (isObject(target.properties) && isObject(own.properties))
    merged.properties = { ...target.properties, ...own.properties };
  if (Array.isArray(target.required) && Array.isArray(own.required))
    merged.required = [...new Set([...target.required, ...own.required])];
  return merged;
}

/**
 * A copy of `node` with each local `$ref` replaced by what it points at, its siblings merged over it (mergedOver).
 * Call after badReferences found none; a reference cycle, or an object that contains itself (a YAML alias), throws
 * RecursiveReferenceError.
 */
export function inlineReferences(
  document: Json,
  node: Json,
  trail: readonly string[] = [],
  within: Set<object> = new Set(),
): Json {
  if (typeof node !== 'object' || node === null) return node;
  if (within.has(node)) throw new RecursiveReferenceError('a schema contains itself (a YAML alias)');
  within.add(node);
  try {
    if (Array.isArray(node)) return node.map((item) => inlineReferences(document, item, trail, within));
    const { $ref: ref, ...rest } = node as Record<string, Json>;
    const own: Record<string, Json> = {};
    for (const [key, value] of Object.entries(rest))
      own[key] = inlineReferences(document, value, trail, within);
    if (typeof ref !== 'string') return own;
    if (trail.includes(ref)) throw new RecursiveReferenceError(`$ref ${ref} refers to itself`);
    const target = inlineReferences(document, pointAt(document, ref), [...trail, ref], within);
    return isObject(target) ? mergedOver(target, own) : target;
  } finally {
    within.delete(node);
  }
}
