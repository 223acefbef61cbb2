// `npm run operations -- import`: a catalogue draft from the provider's own OpenAPI document. Every operation is kept,
// none with a scope, so nothing is served until an operator has reviewed each one and given it a scope.

type Json = Record<string, unknown>;
const isRecord = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** `getApiSubscriptionsId` for GET /api/subscriptions/{id}: for operations the provider left unnamed. */
function operationIdOf(method: string, path: string): string {
  const words = path
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1));
  return `${method}${words.join('')}`.slice(0, 64);
}

/** OpenAPI 3.0's `nullable: true` as 3.1 says it (a type that admits null), at every depth. */
function toJsonSchema2020(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(toJsonSchema2020);
  if (!isRecord(node)) return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node)) if (key !== 'nullable') out[key] = toJsonSchema2020(value);
  if (node.nullable === true && typeof node.type === 'string') out.type = [node.type, 'null'];
  return out;
}

export interface ImportResult {
  readonly draft: Json;
  /** Operations kept, as `METHOD /path (operationId)`. */
  readonly operations: readonly string[];
}

/** The draft; throws an Error with a sentence when the input is not an OpenAPI 3.x document. */
export function draftFromProviderDocument(provider: unknown): ImportResult {
  if (!isRecord(provider) || typeof provider.openapi !== 'string' || !/^3\.[01]\./.test(provider.openapi))
    throw new Error('the provider document must be OpenAPI 3.0 or 3.1 (its "openapi" field)');
  if (!isRecord(provider.paths)) throw new Error('the provider document has no paths');
  const source = provider.openapi.startsWith('3.0') ? (toJsonSchema2020(provider) as Json) : provider;
  const paths: Json = {};
  const operations: string[] = [];
  const ids = new Set<string>();
  for (const [path, rawItem] of Object.entries(source.paths as Json)) {
    if (!isRecord(rawItem)) continue;
    const item: Json = {};
    for (const [key, value] of Object.entries(rawItem)) {
      if (!METHODS.includes(key)) {
        if (key === 'parameters' || key === 'summary' || key === 'description') item[key] = value;
        continue;
      }
      if (!isRecord(value)) continue;
      // The provider's own authentication and servers are the gateway's business, never a caller's.
      const { security: _security, servers: _servers, callbacks: _callbacks, ...operation } = value;
      let id = typeof operation.operationId === 'string' ? operation.operationId : operationIdOf(key, path);
      while (ids.has(id)) id = `${id}_`;
      ids.add(id);
      item[key] = { operationId: id, ...operation, 'x-gateway': {} };
      operations.push(`${key.toUpperCase()} ${path} (${id})`);
    }
    if (Object.keys(item).some((key) => METHODS.includes(key))) paths[path] = item;
  }
  const components = isRecord(source.components) ? { ...source.components } : {};
  delete components.securitySchemes;
  const info = isRecord(source.info) ? source.info : {};
  return {
    draft: {
      openapi: '3.1.0',
      info: {
        title: `Catalogue draft of ${typeof info.title === 'string' ? info.title : 'the provider'}`,
        version: typeof info.version === 'string' ? info.version : '0',
        description:
          'Imported by `npm run operations -- import`. No operation has a scope: none is served until reviewed. ' +
          'For each one to serve: check its schemas (they validate requests and filter answers), then add ' +
          '"scope" (and cache, timeoutMs, idempotency) under x-gateway (docs/catalogue.md).',
      },
      paths,
      ...(Object.keys(components).length > 0 && { components }),
    },
    operations,
  };
}
