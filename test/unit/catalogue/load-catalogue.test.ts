import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { CatalogueError, EXTENSION_SCHEMA, loadCatalogue, parseCatalogue } from '../../../src/catalogue';
import { GatewayError } from '../../../src/http/gateway-error';

const OPTIONS = { maxTimeoutMs: 10_000 };
const SHIPPED = join(__dirname, '../../../config/operations.json');

type Doc = Record<string, any>;

/** A small valid document: one GET with a path and a query parameter, one POST with a body. */
function document(): Doc {
  return {
    openapi: '3.1.0',
    info: { title: 't', version: '1' },
    paths: {
      '/api/things/{thingId}': {
        get: {
          operationId: 'thing',
          'x-gateway': { scope: 'things:read', cache: { ttlSeconds: 5 } },
          parameters: [
            {
              name: 'thingId',
              in: 'path',
              required: true,
              schema: { type: 'string', pattern: '^[a-z0-9]+$' },
            },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 10 } },
          ],
          responses: {
            '200': {
              description: 'ok',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } },
            },
          },
        },
      },
      '/api/things': {
        post: {
          operationId: 'makeThing',
          'x-gateway': { scope: 'things:write', upstream: { path: '/v2/things' }, idempotency: 'required' },
          requestBody: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    name: { type: 'string' },
                    tags: { type: 'array', items: { type: 'object', properties: { k: { type: 'string' } } } },
                    strict: {
                      type: 'object',
                      properties: { a: { type: 'string' } },
                      additionalProperties: false,
                    },
                  },
                  required: ['name'],
                },
              },
            },
          },
          responses: { '201': { description: 'made' } },
        },
      },
    },
    components: {
      schemas: {
        Thing: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            inner: { type: 'object', properties: { x: { type: 'number' } } },
          },
        },
      },
    },
  };
}

function problemsOf(doc: unknown, format: 'json' | 'yaml' = 'json'): readonly string[] {
  const text = typeof doc === 'string' ? doc : format === 'yaml' ? stringify(doc) : JSON.stringify(doc);
  try {
    parseCatalogue(text, format, OPTIONS);
  } catch (error) {
    expect(error).toBeInstanceOf(CatalogueError);
    return (error as CatalogueError).problems;
  }
  throw new Error('the document was accepted');
}

function refusal(run: () => unknown): GatewayError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(GatewayError);
    return error as GatewayError;
  }
  throw new Error('accepted');
}

describe('the shipped catalogue', () => {
  test('declares the seed operations under their names, scopes and settings', () => {
    const catalogue = loadCatalogue(SHIPPED, OPTIONS);
    const summary = catalogue.operations.map((op) => [
      op.id,
      op.method,
      op.path,
      op.scope,
      op.idempotency,
      op.answer,
    ]);
    // Their answers pass through as before the catalogue (SPEC §3); operations added later are strict by default.
    expect(summary).toEqual([
      ['validation', 'POST', '/api/validation/document', 'documents:validate', 'optional', 'passthrough'],
      ['plan', 'GET', '/api/subscriptions/plan/{internalId}', 'plans:read', 'none', 'passthrough'],
    ]);
    expect(catalogue.operations.map((op) => op.filterAnswer)).toEqual([undefined, undefined]);
    expect(catalogue.unserved).toEqual([]);
  });

  test('config/operations.schema.json is the extension schema the loader checks', () => {
    const onDisk = JSON.parse(
      readFileSync(join(__dirname, '../../../config/operations.schema.json'), 'utf8'),
    );
    expect(onDisk).toEqual(EXTENSION_SCHEMA);
  });

  test('YAML reads as JSON does', () => {
    const yaml = parseCatalogue(stringify(document()), 'yaml', OPTIONS);
    expect(yaml.operations.map((op) => op.id)).toEqual(['makeThing', 'thing']);
  });
});

describe('requests validated by the document', () => {
  const catalogue = parseCatalogue(JSON.stringify(document()), 'json', OPTIONS);
  const get = catalogue.operations.find((op) => op.id === 'thing')!;
  const post = catalogue.operations.find((op) => op.id === 'makeThing')!;

  test('path and declared query parameters reach the upstream path; undeclared ones do not', () => {
    expect(get.request.validate({ thingId: 'abc' }, 'limit=3&secret=x', undefined)).toEqual({
      path: '/api/things/abc?limit=3',
    });
    expect(get.request.validate({ thingId: 'abc' }, undefined, undefined).path).toBe('/api/things/abc');
  });

  test('bad parameters: 400 naming each', () => {
    expect(refusal(() => get.request.validate({ thingId: 'A/B' }, undefined, undefined)).errors).toEqual([
      { path: 'thingId', message: expect.any(String) },
    ]);
    expect(refusal(() => get.request.validate({ thingId: 'a' }, 'limit=99', undefined)).errors).toEqual([
      { path: 'limit', message: expect.any(String) },
    ]);
  });

  test('unknown body properties are dropped at every depth; an explicit additionalProperties:false refuses', () => {
    const body = { name: 'n', evil: 1, tags: [{ k: 'v', sneaky: true }], strict: { a: 'x' } };
    expect(post.request.validate({}, undefined, body)).toEqual({
      path: '/v2/things',
      body: { name: 'n', tags: [{ k: 'v' }], strict: { a: 'x' } },
    });
    const refused = refusal(() =>
      post.request.validate({}, undefined, { name: 'n', strict: { a: 'x', b: 1 } }),
    );
    expect(refused.errors).toEqual([{ path: 'strict.b', message: 'is not allowed' }]);
  });

  test('answer: strict keeps only declared properties at every depth; error answers pass', () => {
    const answer = (status: number, value: unknown) => ({
      status,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(value)),
    });
    const filtered = get.filterAnswer!(answer(200, { id: '1', leak: 'x', inner: { x: 1, leak: 2 } }));
    expect(JSON.parse(filtered.body.toString())).toEqual({ id: '1', inner: { x: 1 } });
    // Written anew even with nothing to drop: a duplicate key's earlier copy never passes as the provider's bytes.
    const same = answer(200, { id: '1' });
    expect(get.filterAnswer!(same).body.toString()).toBe('{"id":"1"}');
    const error = answer(404, { status: { code: '404' }, extra: 1 });
    expect(get.filterAnswer!(error)).toBe(error);
  });

  test('x-gateway fields are exposed per operation (idempotency for SPEC §13)', () => {
    expect(post).toMatchObject({ idempotency: 'required', forwardIdempotencyKey: false, hasBody: true });
    expect(get).toMatchObject({ cacheTtlSeconds: 5, idempotency: 'none', hasBody: false, answer: 'strict' });
  });
});

describe('hostile documents: a clear error naming the operation and the field, never a crash', () => {
  test('invalid JSON and invalid YAML', () => {
    expect(problemsOf('{"openapi": ')[0]).toMatch(/is not valid JSON/);
    expect(problemsOf('openapi: [3.1\n  paths: {', 'yaml')[0]).toMatch(/is not valid YAML/);
    expect(problemsOf('a: 1\na: 2\n', 'yaml')[0]).toMatch(/is not valid YAML/);
  });

  test('a misspelled x-gateway field', () => {
    const doc = document();
    doc.paths['/api/things/{thingId}'].get['x-gateway'] = { scope: 'things:read', cahce: { ttlSeconds: 5 } };
    expect(problemsOf(doc)).toEqual([
      'GET /api/things/{thingId} (thing): x-gateway has an unknown field "cahce"',
    ]);
  });

  test('a $ref that points nowhere, or outside the file', () => {
    const nowhere = document();
    nowhere.paths['/api/things/{thingId}'].get.responses['200'].content['application/json'].schema.$ref =
      '#/components/schemas/Nope';
    expect(problemsOf(nowhere).join()).toMatch(/\$ref "#\/components\/schemas\/Nope" points nowhere/);
    const outside = document();
    outside.components.schemas.Thing = { $ref: 'https://evil.example/schema.json' };
    expect(problemsOf(outside).join()).toMatch(/leaves the document/);
    const recursive = document();
    recursive.components.schemas.Thing = {
      type: 'object',
      properties: { self: { $ref: '#/components/schemas/Thing' } },
    };
    expect(problemsOf(recursive).join()).toMatch(/thingId.*refers to itself/);
  });

  test('a path template whose parameter has no schema', () => {
    const doc = document();
    doc.paths['/api/things/{thingId}'].get.parameters = [];
    expect(problemsOf(doc)).toEqual([
      'GET /api/things/{thingId} (thing): path parameter {thingId} has no schema in parameters',
    ]);
    const noSchema = document();
    delete noSchema.paths['/api/things/{thingId}'].get.parameters[0].schema;
    expect(problemsOf(noSchema).join()).toMatch(/parameter thingId \(in: path\) has no schema/);
  });

  test('two operations on one path and method', () => {
    const doc = document();
    doc.paths['/api/things/{otherId}'] = structuredClone(doc.paths['/api/things/{thingId}']);
    doc.paths['/api/things/{otherId}'].get.operationId = 'thing2';
    doc.paths['/api/things/{otherId}'].get.parameters[0].name = 'otherId';
    expect(problemsOf(doc).join()).toMatch(/the same path and method as GET \/api\/things\/\{thingId\}/);
    const sameId = document();
    sameId.paths['/api/things'].post.operationId = 'thing';
    expect(problemsOf(sameId).join()).toMatch(/operationId thing is used twice/);
  });

  test('a scope-less operation is not served, and not an error', () => {
    const doc = document();
    delete doc.paths['/api/things'].post['x-gateway'].scope;
    const catalogue = parseCatalogue(JSON.stringify(doc), 'json', OPTIONS);
    expect(catalogue.operations.map((op) => op.id)).toEqual(['thing']);
    expect(catalogue.unserved).toEqual(['POST /api/things (makeThing)']);
    expect(catalogue.published.paths['/api/things']).toBeUndefined();
    expect(JSON.stringify(catalogue.published)).not.toContain('x-gateway');
  });

  test.each([
    ['..', '/api/../token/'],
    ['an absolute URL', 'https://evil.example/api/things'],
    ['another host', '//evil.example/api/things'],
    ['a query', '/api/things?x=1'],
    ['an undeclared parameter', '/api/{nope}'],
  ])('an upstream path with %s', (_name, path) => {
    const doc = document();
    doc.paths['/api/things'].post['x-gateway'].upstream = { path };
    expect(problemsOf(doc).join()).toMatch(/^POST \/api\/things \(makeThing\): x-gateway\.upstream\.path/);
  });

  test.each(['/healthz', '/READYZ', '/metrics/', '/openapi.json', '/bff/session', '/Bff'])(
    "an operation on the gateway's own path %s (the catalogue is routed first)",
    (path) => {
      const doc = document();
      doc.paths[path] = doc.paths['/api/things'];
      delete doc.paths['/api/things'];
      doc.paths[path].post['x-gateway'].upstream = { path: '/api/things' };
      expect(problemsOf(doc).join()).toMatch(/\(makeThing\): the path belongs to the gateway/);
    },
  );

  test('x-gateway on a path item is refused (it configures nothing) and never published', () => {
    const doc = document();
    doc.paths['/api/things']['x-gateway'] = { upstream: { path: '/internal/v2/things' } };
    expect(problemsOf(doc)).toEqual([
      'paths./api/things: x-gateway belongs on an operation (get, post, put, patch, delete), not on the path item',
    ]);
  });

  test('a path item by $ref is refused; /openapi.json carries no x-gateway left in components', () => {
    const byRef = document();
    byRef.components.pathItems = { Things: byRef.paths['/api/things'] };
    byRef.paths['/api/things'] = { $ref: '#/components/pathItems/Things' };
    expect(problemsOf(byRef)).toEqual([
      'paths./api/things: a path item must be written in place, not a $ref',
    ]);
    const leftOver = document();
    leftOver.components.pathItems = { Old: structuredClone(leftOver.paths['/api/things']) };
    const catalogue = parseCatalogue(JSON.stringify(leftOver), 'json', OPTIONS);
    expect(JSON.stringify(catalogue.published)).not.toContain('x-gateway');
    expect(JSON.stringify(catalogue.published)).not.toContain('/v2/things');
  });

  test('settings that contradict the method or the configuration', () => {
    const doc = document();
    doc.paths['/api/things'].post['x-gateway'].cache = { ttlSeconds: 1 };
    doc.paths['/api/things/{thingId}'].get['x-gateway'].idempotency = 'optional';
    doc.paths['/api/things/{thingId}'].get['x-gateway'].timeoutMs = 60_000;
    expect(problemsOf(doc)).toEqual([
      'GET /api/things/{thingId} (thing): x-gateway.idempotency is for methods other than GET',
      'GET /api/things/{thingId} (thing): x-gateway.timeoutMs must be at most UPSTREAM_TIMEOUT_MS (10000)',
      'POST /api/things (makeThing): x-gateway.cache is for GET operations only',
    ]);
  });

  test('answer "stream" is refused beside a cache or an idempotency other than "none"', () => {
    const doc = document();
    doc.paths['/api/things/{thingId}'].get['x-gateway'].answer = 'stream'; // with its cache.ttlSeconds
    doc.paths['/api/things'].post['x-gateway'].answer = 'stream'; // with idempotency: required
    expect(problemsOf(doc)).toEqual([
      'GET /api/things/{thingId} (thing): x-gateway.answer "stream" cannot be cached (x-gateway.cache): a streamed answer is never kept',
      'POST /api/things (makeThing): x-gateway.answer "stream" needs x-gateway.idempotency "none": a streamed answer cannot be kept for a replay',
    ]);
  });

  test('answer "stream" without cache or idempotency loads: never filtered', () => {
    const doc = document();
    doc.paths['/api/things/{thingId}'].get['x-gateway'] = { scope: 'things:read', answer: 'stream' };
    doc.paths['/api/things'].post['x-gateway'] = {
      scope: 'things:write',
      answer: 'stream',
      idempotency: 'none',
    };
    const catalogue = parseCatalogue(JSON.stringify(doc), 'json', OPTIONS);
    expect(catalogue.operations.map((op) => [op.id, op.answer, op.filterAnswer])).toEqual([
      ['makeThing', 'stream', undefined],
      ['thing', 'stream', undefined],
    ]);
  });

  test('not an OpenAPI 3.1 document', () => {
    expect(problemsOf([])).toEqual(['must be an OpenAPI document (a JSON object)']);
    expect(problemsOf({ openapi: '3.0.0', paths: {} })).toEqual(['openapi must be "3.1.x"']);
  });
});

describe('the README walkthrough', () => {
  test('"Adding a provider operation" declares an operation the shipped catalogue then serves, strictly', () => {
    const readme = readFileSync(join(__dirname, '../../../README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Adding a provider operation'));
    const snippet = /```json\n([\s\S]*?)```/.exec(section)?.[1];
    expect(snippet).toBeDefined();
    const document = JSON.parse(readFileSync(SHIPPED, 'utf8'));
    Object.assign(document.paths, JSON.parse(`{${snippet}}`));
    const catalogue = parseCatalogue(JSON.stringify(document), 'json', OPTIONS);
    const subscription = catalogue.operations.find((op) => op.id === 'subscription');
    expect(subscription).toMatchObject({
      method: 'GET',
      path: '/api/subscriptions/{id}',
      scope: 'plans:read',
    });
    const provider = { id: 'sub_7Hq2Lm9X', planId: 'p', status: 'ACTIVE', riskScore: 0.1 };
    const answer = subscription!.filterAnswer!({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(provider)),
    });
    expect(JSON.parse(answer.body.toString())).toEqual({ id: 'sub_7Hq2Lm9X', planId: 'p', status: 'ACTIVE' });
  });
});

describe('the answer version (part of the cache key of an operation kept answers)', () => {
  const versionOf = (doc: Doc, id = 'thing') =>
    parseCatalogue(JSON.stringify(doc), 'json', OPTIONS).operations.find((op) => op.id === id)?.answerVersion;

  test('is the same for the same document, and for a change outside the answer (summary, scope, parameters)', () => {
    const base = versionOf(document());
    expect(base).toMatch(/^[0-9a-f]{12}$/);
    expect(versionOf(document())).toBe(base);
    const other = document();
    other.paths['/api/things/{thingId}'].get.summary = 'Read a thing.';
    other.paths['/api/things/{thingId}'].get['x-gateway'].scope = 'things:list';
    other.paths['/api/things/{thingId}'].get.parameters.pop();
    expect(versionOf(other)).toBe(base);
  });

  test('changes when a 2xx schema changes (through a $ref too) or the answer mode does', () => {
    const base = versionOf(document());
    const narrower = document();
    delete narrower.components.schemas.Thing.properties.inner;
    expect(versionOf(narrower)).not.toBe(base);
    const passthrough = document();
    passthrough.paths['/api/things/{thingId}'].get['x-gateway'].answer = 'passthrough';
    expect(versionOf(passthrough)).not.toBe(base);
  });
});
