// A second adversarial read of the strict filter's rewrite (377c154): every case here failed on it. Regressions of
// request validation and of loading when every non-annotation `$ref` sibling became `{allOf: [target, siblings]}` (for
// parameters, request bodies and responses too, which are no schemas); successes documented without a schema or not
// at all; an object where only an array is documented; patternProperties run against keys the provider chooses.

import { CatalogueError, type CatalogueOperation, parseCatalogue } from '../../../src/catalogue';
import { compileAnswerFilter } from '../../../src/catalogue/internal/answer-filter';
import { MAX_PATTERN_KEY_LENGTH } from '../../../src/catalogue/internal/key-patterns';
import { GatewayError } from '../../../src/http/gateway-error';

const OPTIONS = { maxTimeoutMs: 10_000 };
const PAN = '4242424242424242';

type Doc = Record<string, any>;

const SCHEMAS = {
  Address: { type: 'object', properties: { city: { type: 'string' } } },
  Card: { type: 'object', properties: { id: { type: 'string' }, last4: { type: 'string' } } },
  Ids: { type: 'array', items: { type: 'string' } },
  Uuid: { type: 'string', format: 'uuid' },
};

/** One served operation, `POST /api/things/{thingId}` unless `method` says otherwise, in a 3.1 document. */
function documentWith(operation: Doc, components: Doc = {}, method = 'post'): string {
  return JSON.stringify({
    openapi: '3.1.0',
    info: { title: 't', version: '1' },
    paths: {
      '/api/things/{thingId}': {
        [method]: {
          operationId: 'thing',
          'x-gateway': { scope: 'things:write' },
          parameters: [{ name: 'thingId', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': { description: 'ok' } },
          ...operation,
        },
      },
    },
    components: { schemas: SCHEMAS, ...components },
  });
}

function operationOf(operation: Doc, components: Doc = {}, method = 'post'): CatalogueOperation {
  return parseCatalogue(documentWith(operation, components, method), 'json', OPTIONS).operations[0]!;
}

function jsonBody(schema: unknown): Doc {
  return { requestBody: { content: { 'application/json': { schema } } } };
}

/** What the caller gets for a provider answer: the (filtered) bytes, or 'refused' when the filter throws a 502. */
function callerGets(operation: CatalogueOperation, status: number, body: string): string {
  const answer = { status, headers: { 'content-type': 'application/json' }, body: Buffer.from(body) };
  if (!operation.filterAnswer) return body;
  try {
    return operation.filterAnswer(answer).body.toString('utf8');
  } catch (error) {
    if (error instanceof GatewayError) return 'refused';
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Loading: `$ref` siblings on objects that are no schemas (Reference Objects: siblings are ignored in OpenAPI 3.1)
// ---------------------------------------------------------------------------------------------------------------

describe('a $ref sibling beside a Reference Object that is no schema (requestBody, parameter, response)', () => {
  test('a requestBody $ref with `required: true` beside it still loads (the catalogue is no longer refused)', () => {
    const components = {
      requestBodies: {
        NewThing: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Address' } } } },
      },
    };
    const operation = { requestBody: { $ref: '#/components/requestBodies/NewThing', required: true } };
    expect(() => operationOf(operation, components)).not.toThrow();
    expect(operationOf(operation, components).hasBody).toBe(true);
  });

  test('a parameter $ref with `required: true` beside it still loads and reads the parameter', () => {
    const components = { parameters: { Limit: { name: 'limit', in: 'query', schema: { type: 'integer' } } } };
    const operation = {
      parameters: [
        { name: 'thingId', in: 'path', required: true, schema: { type: 'string' } },
        { $ref: '#/components/parameters/Limit', required: true },
      ],
    };
    expect(() => operationOf(operation, components)).not.toThrow();
    expect(
      operationOf(operation, components).request.validate({ thingId: 'a' }, 'limit=3', undefined).path,
    ).toBe('/api/things/a?limit=3');
  });

  test('a 2xx response $ref with an x-* sibling keeps its JSON schema: the answer is still filtered (PAN leaked)', () => {
    const components = {
      responses: {
        CardOk: {
          description: 'ok',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Card' } } },
        },
      },
    };
    const operation = operationOf(
      { responses: { '200': { $ref: '#/components/responses/CardOk', 'x-internal': true } } },
      components,
      'get',
    );
    expect(callerGets(operation, 200, JSON.stringify({ id: 'c', pan: PAN }))).not.toContain(PAN);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Request validation: what `{allOf: [target, siblings]}` changes in what reaches the provider
// ---------------------------------------------------------------------------------------------------------------

describe('request validation of a schema $ref with non-annotation siblings', () => {
  const sent = (propertySchema: unknown, value: unknown) =>
    operationOf(jsonBody({ type: 'object', properties: { address: propertySchema } })).request.validate(
      { thingId: 'a' },
      undefined,
      { address: value },
    ).body as { address: Record<string, unknown> };

  test.each([
    ['an x-* extension', { 'x-order': 1 }],
    ['xml', { xml: { name: 'address' } }],
    ['externalDocs', { externalDocs: { url: 'https://example.com/address' } }],
    ['discriminator', { discriminator: { propertyName: 'city' } }],
  ])(
    '$ref + %s: undeclared body fields are still dropped before forwarding (they reach the provider)',
    (_, sibling) => {
      const body = sent(
        { $ref: '#/components/schemas/Address', ...sibling },
        { city: 'Lyon', isAdmin: true },
      );
      expect(body.address).toEqual({ city: 'Lyon' });
    },
  );

  test('$ref + `nullable: true` (the 3.0 idiom) still loads (ajv: "nullable" cannot be used without "type")', () => {
    const operation = jsonBody({
      type: 'object',
      properties: { address: { $ref: '#/components/schemas/Address', nullable: true } },
    });
    expect(() => operationOf(operation)).not.toThrow();
  });

  test('a query array parameter written $ref + maxItems still reads repeated values (every request was a 400)', () => {
    const operation = operationOf({
      parameters: [
        { name: 'thingId', in: 'path', required: true, schema: { type: 'string' } },
        { name: 'ids', in: 'query', schema: { $ref: '#/components/schemas/Ids', maxItems: 5 } },
      ],
    });
    expect(operation.request.validate({ thingId: 'a' }, 'ids=a&ids=b', undefined).path).toBe(
      '/api/things/a?ids=a&ids=b',
    );
  });

  test('a uuid path parameter written $ref + maxLength is still lower-cased upstream (one spelling, one cache key)', () => {
    const operation = operationOf(
      {
        parameters: [
          {
            name: 'thingId',
            in: 'path',
            required: true,
            schema: { $ref: '#/components/schemas/Uuid', maxLength: 36 },
          },
        ],
      },
      {},
      'get',
    );
    expect(
      operation.request.validate({ thingId: '3F2504E0-4F89-11D3-9A0C-0305E82C3301' }, undefined, undefined)
        .path,
    ).toBe('/api/things/3f2504e0-4f89-11d3-9a0c-0305e82c3301');
  });
});

// ---------------------------------------------------------------------------------------------------------------
// answer: strict: documented 2xx without content, open schemas, an object where an array is documented
// ---------------------------------------------------------------------------------------------------------------

describe('answer: strict and the 2xx statuses an operation documents', () => {
  const withSchema = { description: 'ok', content: { 'application/json': { schema: SCHEMAS.Card } } };

  test('a 2xx documented without content (202) answered with JSON is not refused as "undocumented", and leaks nothing', () => {
    const operation = operationOf({ responses: { '200': withSchema, '202': { description: 'accepted' } } });
    const gets = callerGets(operation, 202, JSON.stringify({ id: 'c', pan: PAN }));
    expect(gets).not.toBe('refused'); // 202 is documented; a refused POST the provider executed reads as a 502
    expect(gets).not.toContain(PAN);
  });

  test('an operation whose only 2xx is documented without content (204) does not pass a 200 JSON answer whole', () => {
    const operation = operationOf({ responses: { '204': { description: 'deleted' } } }, {}, 'delete');
    expect(callerGets(operation, 200, JSON.stringify({ id: 'c', pan: PAN }))).not.toContain(PAN);
  });

  test("an open schema (nothing to filter) passes the provider's bytes as they come, unparsed (docs/catalogue.md)", () => {
    const open = { type: 'object', additionalProperties: true };
    const filter = compileAnswerFilter(new Map([['200', open]]));
    const cut = {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from('{"id":"c"'),
    };
    expect(filter(cut)).toBe(cut);
  });

  test('an object answered where only an array is documented is not passed whole (the mirror of the array case)', () => {
    const list = { type: 'array', items: SCHEMAS.Card };
    const filter = compileAnswerFilter(new Map([['200', list]]));
    const answer = {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ id: 'c', pan: PAN })),
    };
    let gets = 'refused';
    try {
      gets = filter(answer).body.toString('utf8');
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
    }
    expect(gets).not.toContain(PAN);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// patternProperties: the operator writes the pattern, the provider writes the keys
// ---------------------------------------------------------------------------------------------------------------

describe('a final read of the strict filter', () => {
  test('an object answered where only a list of strings is documented keeps nothing', () => {
    const filter = compileAnswerFilter(new Map([['200', SCHEMAS.Ids]]));
    const answer = filter({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ pan: PAN })),
    });
    expect(answer.body.toString('utf8')).toBe('{}');
  });

  test('an array written under then (if/then/else) filters its elements', () => {
    const schema = {
      if: { type: 'array' },
      // biome-ignore lint/suspicious/noThenProperty: the JSON Schema keyword, not a thenable
      then: { type: 'array', items: SCHEMAS.Card },
    };
    const filter = compileAnswerFilter(new Map([['200', schema]]));
    const answer = filter({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify([{ id: 'c', pan: PAN }])),
    });
    expect(JSON.parse(answer.body.toString('utf8'))).toEqual([{ id: 'c' }]);
  });

  test('a property documented as a string and answered as an object keeps nothing of it', () => {
    const schema = { type: 'object', properties: { card: { type: 'string' } } };
    const filter = compileAnswerFilter(new Map([['200', schema]]));
    const answer = filter({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ card: { pan: PAN, cvv: '123' } })),
    });
    expect(JSON.parse(answer.body.toString('utf8'))).toEqual({ card: {} });
  });

  test('a list of strings answered with an object among them, and a string answer given as an object, keep nothing', () => {
    const list = compileAnswerFilter(new Map([['200', SCHEMAS.Ids]]));
    const json = (value: unknown) => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(value)),
    });
    expect(list(json(['a', { pan: PAN }])).body.toString('utf8')).toBe('["a",{}]');
    const text = compileAnswerFilter(new Map([['200', { type: 'string' }]]));
    expect(text(json({ pan: PAN })).body.toString('utf8')).toBe('{}');
    expect(text(json('ok')).body.toString('utf8')).toBe('"ok"');
  });

  test('where a 2xx is documented, default (often an open error schema) does not speak for an unlisted 2xx', () => {
    const open = { type: 'object', additionalProperties: true };
    const operation = operationOf(
      {
        responses: {
          '200': { description: 'a card', content: { 'application/json': { schema: SCHEMAS.Card } } },
          default: { description: 'an error', content: { 'application/json': { schema: open } } },
        },
      },
      {},
      'get',
    );
    expect(callerGets(operation, 201, JSON.stringify({ id: 'c', pan: PAN }))).toBe('{}');
  });

  test('a success documented only under default is filtered by it, not answered {}', () => {
    const operation = operationOf(
      {
        responses: {
          default: { description: 'a card', content: { 'application/json': { schema: SCHEMAS.Card } } },
        },
      },
      {},
      'get',
    );
    expect(JSON.parse(callerGets(operation, 200, JSON.stringify({ id: 'c', pan: PAN })))).toEqual({
      id: 'c',
    });
  });
});

describe('answer: strict patternProperties', () => {
  test('a pattern valid in ECMA-262 but not in unicode mode: the catalogue loads, or the problem names patternProperties', () => {
    const schema = {
      type: 'object',
      patternProperties: { '^[\\w-.]+$': { type: 'string' } },
      additionalProperties: false,
    };
    const operation = {
      responses: { '200': { description: 'ok', content: { 'application/json': { schema } } } },
    };
    try {
      operationOf(operation, {}, 'get');
    } catch (error) {
      expect(error).toBeInstanceOf(CatalogueError);
      expect((error as Error).message).toMatch(/patternProperties/);
    }
  });

  const closedMap = (pattern: string) => ({
    type: 'object',
    patternProperties: { [pattern]: { type: 'string' } },
    additionalProperties: false,
  });

  test.each(['(a|aa)+$', '^((a+))+$', '^((a+)b?)+$', '^(?:[a-z]+-?)*$', '^(?:a|a){40}$', '^(a?){40}a{40}$'])(
    'the backtracking pattern %s is refused at load',
    (pattern) => {
      expect(() => compileAnswerFilter(new Map([['200', closedMap(pattern)]]))).toThrow(/a repeated group/);
    },
  );

  test.each(['^[A-Z]{3}$', '^(?:ab)+$', '^(?<code>[A-Z]{3})$', '^x-[a-z-]+$', '[(+]+'])(
    'the pattern %s loads',
    (pattern) => {
      expect(() => compileAnswerFilter(new Map([['200', closedMap(pattern)]]))).not.toThrow();
    },
  );

  test('a pattern with three unbounded quantifiers (cubic in the key) is refused at load', () => {
    expect(() => compileAnswerFilter(new Map([['200', closedMap('^.*.*.*$')]]))).toThrow(
      /more than 2 unbounded quantifiers/,
    );
  });

  test('a nested-quantifier pattern (exponential backtracking on a key the provider writes) is refused at load', () => {
    expect(() => compileAnswerFilter(new Map([['200', closedMap('^([a-z0-9]+-?)+$')]]))).toThrow(
      /patternProperties "\^\(\[a-z0-9\]\+-\?\)\+\$": a repeated group/,
    );
  });

  test(`a provider key longer than ${MAX_PATTERN_KEY_LENGTH} characters is never matched against a pattern: dropped as undeclared`, () => {
    const filter = compileAnswerFilter(new Map([['200', closedMap('[0-9]+-[0-9]+')]]));
    const long = `${'1'.repeat(MAX_PATTERN_KEY_LENGTH)}-1`;
    const answer = filter({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ [long]: 'v', '12-34': 'w' })),
    });
    expect(JSON.parse(answer.body.toString('utf8'))).toEqual({ '12-34': 'w' });
  });
});
