// `answer: strict` against its adversaries (a second read after 9f34f2b): schemas an operator could plausibly write in
// OpenAPI 3.1, and answers a hostile or careless provider could send. Every case here leaked undeclared data, dropped
// or altered declared data, or threw, on the filter before this file; docs/catalogue.md ("## Answers") says what the
// filter does, and what it leaves as it comes.

import { CatalogueError, parseCatalogue } from '../../../src/catalogue';
import { compileAnswerFilter, MAX_SCHEMA_DEPTH } from '../../../src/catalogue/internal/answer-filter';
import { GatewayError } from '../../../src/http/gateway-error';
import { Card, filtered, filteredBytes } from '../../support/strict-answers';

const PAN = '4242424242424242';

// ---------------------------------------------------------------------------------------------------------------
// Leaks of undeclared data
// ---------------------------------------------------------------------------------------------------------------

describe('answer: strict leaks: additionalProperties schemas inside branches', () => {
  const CardMap = { type: 'object', additionalProperties: Card };

  test('a nullable map of cards (anyOf [map, null]) filters each card', () => {
    const schema = { anyOf: [CardMap, { type: 'null' }] };
    expect(filtered(schema, { main: { id: 'c', pan: PAN } })).toEqual({ main: { id: 'c' } });
  });

  test('a map of cards wrapped in allOf (allOf [$ref, description]) filters each card', () => {
    const schema = { allOf: [CardMap, { description: 'cards by name' }] };
    expect(filtered(schema, { main: { id: 'c', pan: PAN } })).toEqual({ main: { id: 'c' } });
  });

  test('a nullable map property type-declared in a oneOf filters its values', () => {
    const schema = { type: 'object', properties: { cards: { oneOf: [CardMap, { type: 'null' }] } } };
    expect(filtered(schema, { cards: { main: { id: 'c', pan: PAN } } })).toEqual({
      cards: { main: { id: 'c' } },
    });
  });
});

describe('answer: strict leaks: a property the schema explicitly forbids', () => {
  test('properties: {pan: false} drops pan, it does not keep it as "declared"', () => {
    const schema = { ...Card, properties: { ...Card.properties, pan: false } };
    expect(filtered(schema, { id: 'c', pan: PAN })).toEqual({ id: 'c' });
  });

  test('an allOf refinement forbidding a property (properties: {pan: false}) drops it', () => {
    const schema = { allOf: [Card, { properties: { pan: false } }] };
    expect(filtered(schema, { id: 'c', pan: PAN })).toEqual({ id: 'c' });
  });
});

describe('answer: strict leaks: answers JSON.parse reads differently from the caller', () => {
  test('duplicate keys: the bytes of an earlier (undeclared-laden) duplicate never reach the caller', () => {
    const schema = { type: 'object', properties: { id: { type: 'string' }, card: Card } };
    // JSON.parse keeps the last `card` (clean): nothing to drop, so the original bytes, PAN included, go out.
    const body = `{"id":"p","card":{"id":"c","pan":"${PAN}"},"card":{"id":"c"}}`;
    expect(filteredBytes(schema, body)).not.toContain(PAN);
  });

  test('a UTF-8 BOM before the JSON (RFC 8259 §8.1: parsers may ignore it) does not turn the filter off', () => {
    const body = `\ufeff{"id":"c","pan":"${PAN}"}`;
    expect(filteredBytes(Card, body)).not.toContain(PAN);
  });
});

describe('answer: strict leaks: keywords the filter does not read', () => {
  test('patternProperties (a map keyed by currency, additionalProperties false) filters its values', () => {
    const Balance = { type: 'object', properties: { amount: { type: 'integer' } } };
    const schema = {
      type: 'object',
      patternProperties: { '^[A-Z]{3}$': Balance },
      additionalProperties: false,
    };
    expect(filtered(schema, { USD: { amount: 1, pan: PAN }, pan: PAN })).toEqual({ USD: { amount: 1 } });
  });

  test('if/then/else declaring the properties: undeclared ones are dropped, not everything kept', () => {
    const schema = {
      type: 'object',
      if: { properties: { kind: { const: 'card' } } },
      // biome-ignore lint/suspicious/noThenProperty: the JSON Schema keyword, not a thenable
      then: { properties: { kind: { type: 'string' }, card: Card } },
      else: { properties: { kind: { type: 'string' }, iban: { type: 'string' } } },
    };
    expect(filtered(schema, { kind: 'card', card: { id: 'c', pan: PAN }, pan: PAN })).toEqual({
      kind: 'card',
      card: { id: 'c' },
    });
  });

  test('unevaluatedProperties given a schema (a map of cards) filters the values', () => {
    const schema = { type: 'object', unevaluatedProperties: Card };
    expect(filtered(schema, { main: { id: 'c', pan: PAN } })).toEqual({ main: { id: 'c' } });
  });

  test('a closed object with no properties (additionalProperties: false) keeps nothing', () => {
    // `properties: {}` already drops everything; `additionalProperties: false` alone says the same and keeps all.
    expect(filtered({ type: 'object', additionalProperties: false }, { pan: PAN })).toEqual({});
  });

  test('a closed empty-object branch (oneOf [Card, {type: object, additionalProperties: false}]) opens nothing', () => {
    const schema = { oneOf: [Card, { type: 'object', additionalProperties: false }] };
    expect(filtered(schema, { id: 'c', pan: PAN })).toEqual({ id: 'c' });
  });

  test('prefixItems with items: false: an element past the tuple is not kept whole', () => {
    const schema = { type: 'array', prefixItems: [Card], items: false };
    const out = filtered(schema, [{ id: 'c' }, { id: 'd', pan: PAN }]);
    expect(JSON.stringify(out)).not.toContain(PAN);
  });
});

describe('answer: strict leaks: shapes and statuses the filter does not cover', () => {
  test('an object schema with properties answered with an array filters (or refuses) its elements', () => {
    const out = filtered(Card, [{ id: 'c', pan: PAN }]);
    expect(JSON.stringify(out)).not.toContain(PAN);
  });

  test('a 2xx status the operation does not document (201, only 200 documented) is not passed unfiltered', () => {
    const filter = compileAnswerFilter(new Map([['200', Card]]));
    // Nothing documents what a 201 may carry: the status passes (the provider did it), none of the body does.
    const answer = filter({
      status: 201,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ id: 'c', pan: PAN })),
    });
    expect([answer.status, answer.body.toString('utf8')]).toEqual([201, '{}']);
  });

  test('an allOf branch that only constrains ({type: object, required}) does not open the object', () => {
    const schema = { allOf: [Card, { type: 'object', required: ['id'] }] };
    expect(filtered(schema, { id: 'c', pan: PAN })).toEqual({ id: 'c' });
  });

  test('a body labelled JSON that does not parse (trailing text a lenient reader skips) is refused, not passed', () => {
    expect(() => filteredBytes(Card, `{"id":"c","pan":"${PAN}"} and more`)).toThrow(GatewayError);
  });

  test(`a schema nested deeper than ${MAX_SCHEMA_DEPTH} levels is refused when it is compiled (at load), not left open`, () => {
    let schema: Record<string, unknown> = Card;
    for (let i = 0; i < MAX_SCHEMA_DEPTH + 1; i++) schema = { type: 'object', properties: { child: schema } };
    expect(() => compileAnswerFilter(new Map([['200', schema]]))).toThrow(/nests deeper than/);
  });

  test('a schema nested deeper than 32 levels still filters its deepest objects', () => {
    let schema: Record<string, unknown> = Card;
    let value: Record<string, unknown> = { id: 'c', pan: PAN };
    for (let i = 0; i < 34; i++) {
      schema = { type: 'object', properties: { child: schema } };
      value = { child: value };
    }
    expect(JSON.stringify(filtered(schema, value))).not.toContain(PAN);
  });
});

describe('answer: strict drops declared properties', () => {
  test('patternProperties beside properties: a key matching a pattern is declared', () => {
    const schema = { ...Card, patternProperties: { '^x_': { type: 'string' } } };
    expect(filtered(schema, { id: 'c', x_ref: 'r', pan: PAN })).toEqual({ id: 'c', x_ref: 'r' });
  });

  test('dependentSchemas: a property declared in a dependent schema is kept', () => {
    const schema = {
      type: 'object',
      properties: { card: Card },
      dependentSchemas: { card: { properties: { holder: { type: 'string' } } } },
    };
    expect(filtered(schema, { card: { id: 'c' }, holder: 'Ada', pan: PAN })).toEqual({
      card: { id: 'c' },
      holder: 'Ada',
    });
  });

  test('if/then: a property then declares beside the top-level properties is kept', () => {
    const schema = {
      type: 'object',
      properties: { kind: { type: 'string' } },
      if: { properties: { kind: { const: 'card' } } },
      // biome-ignore lint/suspicious/noThenProperty: the JSON Schema keyword, not a thenable
      then: { properties: { card: Card } },
    };
    expect(filtered(schema, { kind: 'card', card: { id: 'c' }, pan: PAN })).toEqual({
      kind: 'card',
      card: { id: 'c' },
    });
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Through the loader: how the document's schemas reach compileAnswerFilter
// ---------------------------------------------------------------------------------------------------------------

type Doc = Record<string, any>;

/** A document with one strict GET whose 200 answer is `content`; `schemas` go to components. */
function documentWith(content: Record<string, unknown>, schemas: Record<string, unknown> = {}): Doc {
  return {
    openapi: '3.1.0',
    info: { title: 't', version: '1' },
    paths: {
      '/api/cards': {
        get: {
          operationId: 'cards',
          'x-gateway': { scope: 'cards:read' },
          responses: { '200': { description: 'ok', content } },
        },
      },
    },
    components: { schemas: { Card, ...schemas } },
  };
}

function loadedFilter(doc: Doc) {
  const catalogue = parseCatalogue(JSON.stringify(doc), 'json', { maxTimeoutMs: 10_000 });
  return catalogue.operations[0].filterAnswer;
}

function answerOf(value: unknown, contentType = 'application/json') {
  return { status: 200, headers: { 'content-type': contentType }, body: Buffer.from(JSON.stringify(value)) };
}

/** A YAML catalogue: `schemas` (YAML lines under components.schemas), one GET whose 200 answer is `responseSchema`. */
function yamlCatalogue(schemas: readonly string[], responseSchema: string): string {
  return [
    'openapi: 3.1.0',
    'info: {title: t, version: "1"}',
    'components:',
    '  schemas:',
    ...schemas.map((line) => `    ${line}`),
    'paths:',
    '  /api/cards:',
    '    get:',
    '      operationId: cards',
    '      x-gateway: {scope: "cards:read"}',
    '      responses:',
    '        "200":',
    '          description: ok',
    '          content:',
    '            application/json:',
    `              schema: ${responseSchema}`,
    '',
  ].join('\n');
}

describe('answer: strict through the loader', () => {
  test('a schema documented under */* (as springdoc writes it) still filters a JSON answer', () => {
    const filter = loadedFilter(documentWith({ '*/*': { schema: { $ref: '#/components/schemas/Card' } } }));
    const out = filter ? filter(answerOf({ id: 'c', pan: PAN })) : answerOf({ id: 'c', pan: PAN });
    expect(out.body.toString('utf8')).not.toContain(PAN);
  });

  test("a $ref with sibling properties (OpenAPI 3.1) keeps the referenced schema's properties too", () => {
    const filter = loadedFilter(
      documentWith({
        'application/json': {
          schema: { $ref: '#/components/schemas/Card', properties: { brand: { type: 'string' } } },
        },
      }),
    )!;
    const out = filter(answerOf({ id: 'c', last4: '4242', brand: 'visa', pan: PAN }));
    expect(JSON.parse(out.body.toString('utf8'))).toEqual({ id: 'c', last4: '4242', brand: 'visa' });
  });

  test("a $ref with a sibling allOf keeps the referenced schema's allOf (it does not open the object)", () => {
    const schemas = {
      Payment: {
        allOf: [{ $ref: '#/components/schemas/Card' }, { properties: { amount: { type: 'integer' } } }],
      },
    };
    const filter = loadedFilter(
      documentWith(
        {
          'application/json': {
            schema: { $ref: '#/components/schemas/Payment', allOf: [{ description: 'the payment' }] },
          },
        },
        schemas,
      ),
    )!;
    const out = filter(answerOf({ id: 'c', amount: 1, pan: PAN }));
    expect(JSON.parse(out.body.toString('utf8'))).toEqual({ id: 'c', amount: 1 });
  });

  test('a YAML merge key (<<: *base) is merged, not left as a key that opens the object', () => {
    const yaml = yamlCatalogue(
      [
        'Base: &base',
        '  type: object',
        '  properties:',
        '    id: {type: string}',
        'Card:',
        '  <<: *base',
        '  description: a card',
      ],
      '{$ref: "#/components/schemas/Card"}',
    );
    const filter = parseCatalogue(yaml, 'yaml', { maxTimeoutMs: 10_000 }).operations[0]?.filterAnswer;
    expect(JSON.parse(filter?.(answerOf({ id: 'c', pan: PAN })).body.toString('utf8') ?? '')).toEqual({
      id: 'c',
    });
  });

  test('a recursive tree written with $dynamicRef is refused at load, not kept whole', () => {
    const schemas = {
      Node: {
        $dynamicAnchor: 'node',
        type: 'object',
        properties: {
          name: { type: 'string' },
          children: { type: 'array', items: { $dynamicRef: '#node' } },
        },
      },
    };
    expect(() =>
      loadedFilter(
        documentWith({ 'application/json': { schema: { $ref: '#/components/schemas/Node' } } }, schemas),
      ),
    ).toThrow(/\$dynamicRef is not supported/);
  });

  test('a recursive schema written with a YAML alias is refused with a CatalogueError, not a stack overflow', () => {
    const yaml = yamlCatalogue(
      [
        'Category: &category',
        '  type: object',
        '  properties:',
        '    name: {type: string}',
        '    parent: *category',
      ],
      '*category',
    );
    let thrown: unknown;
    try {
      parseCatalogue(yaml, 'yaml', { maxTimeoutMs: 10_000 });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CatalogueError);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Declared data altered, and throws on hostile input
// ---------------------------------------------------------------------------------------------------------------

describe('answer: strict alters declared data or throws', () => {
  test('a declared 64-bit id keeps its digits when an undeclared sibling is dropped', () => {
    const schema = { type: 'object', properties: { id: { type: 'integer' } } };
    const out = filteredBytes(schema, `{"id":9007199254740993,"pan":"${PAN}"}`);
    expect(out).toContain('9007199254740993');
    expect(out).not.toContain(PAN);
  });

  test.each(['1.50', '-0', '1e3', '1E+21', '0.0000001', '123456789.123456789', '-9007199254740993'])(
    'the number %s keeps the text the provider wrote, beside a long digit string and a dropped field',
    (text) => {
      const schema = { type: 'object', properties: { n: { type: 'number' }, cbu: { type: 'string' } } };
      const out = filteredBytes(schema, `{"cbu":"0170099220000067797370","n": ${text},"pan":"${PAN}"}`);
      expect(out).toBe(`{"cbu":"0170099220000067797370","n":${text}}`);
    },
  );

  test('a deeply nested value under an open property does not make the filter throw a RangeError', () => {
    const schema = { type: 'object', properties: { id: { type: 'string' }, metadata: { type: 'object' } } };
    const depth = 20_000; // 40 kB, far under the 1 MiB a read answer may be
    const body = `{"id":"c","pan":"${PAN}","metadata":{"x":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
    let thrown: unknown;
    let out = '';
    try {
      out = filteredBytes(schema, body);
    } catch (error) {
      thrown = error;
    }
    // Refused as a gateway error (a keyed request keeps it for its retries): never a stack overflow, never the PAN.
    if (thrown === undefined) expect(out).not.toContain(PAN);
    else expect(thrown).toBeInstanceOf(GatewayError);
  });
});
