import { GatewayError } from '../../../src/http/gateway-error';
import { readIdempotencyKey } from '../../../src/idempotency/internal/idempotency-key';

const req = (...values: string[]) => ({
  headersDistinct: values.length === 0 ? {} : { 'idempotency-key': values },
});
const refusal = (...values: string[]) => {
  try {
    readIdempotencyKey(req(...values));
  } catch (error) {
    return error;
  }
  return undefined;
};

describe('Idempotency-Key header', () => {
  test('absent: no key; 1 to 255 visible ASCII characters: the key as sent', () => {
    expect(readIdempotencyKey(req())).toBeUndefined();
    expect(readIdempotencyKey(req('a'))).toBe('a');
    expect(readIdempotencyKey(req('8e03978e-40d5-43e8-bc93-6894a57f9324'))).toBe(
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    );
    expect(readIdempotencyKey(req('x'.repeat(255)))).toHaveLength(255);
    expect(readIdempotencyKey(req('"quoted!~"'))).toBe('"quoted!~"');
  });

  test.each([
    ['empty', ['']],
    ['256 characters', ['x'.repeat(256)]],
    ['a space', ['a b']],
    ['a tab', ['a\tb']],
    ['a control character', ['a\u0001b']],
    ['DEL', ['a\u007fb']],
    ['unicode', ['clé']],
    ['latin-1 bytes as Node decodes them', ['\u00c3\u00a9']],
    ['several headers', ['a', 'b']],
  ])('%s: 400 INVALID_REQUEST naming the header', (_name, values) => {
    const error = refusal(...values);
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).status).toBe(400);
    expect((error as GatewayError).reason).toBe('INVALID_REQUEST');
    expect((error as GatewayError).errors?.[0]?.path).toBe('header:Idempotency-Key');
  });
});
