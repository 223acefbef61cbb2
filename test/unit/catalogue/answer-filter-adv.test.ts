import { compileAnswerFilter } from '../../../src/catalogue/internal/answer-filter';
import { Card, filtered } from '../../support/strict-answers';

describe('answer: strict, composed schemas (adversarial read of issue 39)', () => {
  test('a nullable object written the OpenAPI 3.1 way (oneOf with type null) still drops undeclared fields', () => {
    const schema = { oneOf: [Card, { type: 'null' }] };
    expect(filtered(schema, { id: 'c', last4: '4242', pan: '4242424242424242' })).toEqual({
      id: 'c',
      last4: '4242',
    });
  });

  test('a nullable nested property (anyOf [$ref-inlined object, null]) drops undeclared fields', () => {
    const schema = {
      type: 'object',
      properties: { card: { anyOf: [Card, { type: 'null' }] } },
    };
    expect(filtered(schema, { card: { id: 'c', pan: '4242424242424242' } })).toEqual({ card: { id: 'c' } });
  });

  test('an allOf branch that only annotates (description) does not open the object', () => {
    const schema = { allOf: [Card, { description: 'the card' }] };
    expect(filtered(schema, { id: 'c', pan: '4242424242424242' })).toEqual({ id: 'c' });
  });

  test('an explicitly open branch (additionalProperties: true) still keeps what comes', () => {
    const schema = { anyOf: [Card, { type: 'object', additionalProperties: true }] };
    expect(filtered(schema, { id: 'c', extra: 1 })).toEqual({ id: 'c', extra: 1 });
  });

  test('a __proto__ key in an answer is dropped, not kept nor turned into a prototype', () => {
    const filter = compileAnswerFilter(new Map([['200', Card]]));
    const answer = filter({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from('{"id":"c","__proto__":{"polluted":1},"constructor":{"x":1}}'),
    });
    expect(JSON.parse(answer.body.toString('utf8'))).toEqual({ id: 'c' });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('answer: strict, arrays (items, prefixItems, and arrays inside branches)', () => {
  const Cards = { type: 'array', items: Card };

  test('a nullable array written anyOf [array, null] drops undeclared fields of its elements', () => {
    const schema = { anyOf: [Cards, { type: 'null' }] };
    expect(filtered(schema, [{ id: 'a', pan: '4242424242424242' }])).toEqual([{ id: 'a' }]);
  });

  test('a nullable array property written oneOf [array, null] drops them too', () => {
    const schema = { type: 'object', properties: { cards: { oneOf: [Cards, { type: 'null' }] } } };
    expect(filtered(schema, { cards: [{ id: 'a', pan: '1' }], pan: '2' })).toEqual({ cards: [{ id: 'a' }] });
  });

  test('an array schema inside allOf filters its elements', () => {
    expect(filtered({ allOf: [Cards, { description: 'the cards' }] }, [{ id: 'a', pan: '1' }])).toEqual([
      { id: 'a' },
    ]);
  });

  test('prefixItems filter each position by its own schema, and items the rest', () => {
    const Plan = { type: 'object', properties: { name: { type: 'string' } } };
    const schema = { type: 'array', prefixItems: [Card, Plan], items: Card };
    expect(
      filtered(schema, [
        { id: 'a', name: 'x', pan: '1' },
        { id: 'b', name: 'y' },
        { id: 'c', name: 'z' },
      ]),
    ).toEqual([{ id: 'a' }, { name: 'y' }, { id: 'c' }]);
  });

  test('elements past prefixItems with no items schema are kept as they come', () => {
    const schema = { type: 'array', prefixItems: [Card] };
    expect(filtered(schema, [{ id: 'a', pan: '1' }, { anything: true }])).toEqual([
      { id: 'a' },
      { anything: true },
    ]);
  });

  test('branches are a union: a key any array branch declares for an element is kept', () => {
    const Plan = { type: 'object', properties: { name: { type: 'string' } } };
    const schema = { anyOf: [Cards, { type: 'array', items: Plan }] };
    expect(filtered(schema, [{ id: 'a', name: 'x', pan: '1' }])).toEqual([{ id: 'a', name: 'x' }]);
  });

  test('a branch that says nothing of the elements (type array, no items) keeps them as they come', () => {
    const schema = { anyOf: [Cards, { type: 'array' }] };
    expect(filtered(schema, [{ id: 'a', pan: '1' }])).toEqual([{ id: 'a', pan: '1' }]);
  });
});
