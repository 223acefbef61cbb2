// TLS failures named from their code, wherever the error wraps it (fetch puts it in `cause`).
import { describeTlsCode, tlsFailureOf } from '../../../src/tls/tls-failure';

describe('tlsFailureOf', () => {
  test('finds the code on the error or down its cause chain', () => {
    const tlsError = Object.assign(new Error('certificate has expired'), { code: 'CERT_HAS_EXPIRED' });
    expect(tlsFailureOf(tlsError)?.code).toBe('CERT_HAS_EXPIRED');
    const fetchError = new TypeError('fetch failed', { cause: tlsError });
    const gatewayError = new Error('UPSTREAM_UNAVAILABLE', { cause: fetchError });
    expect(tlsFailureOf(gatewayError)).toMatchObject({
      code: 'CERT_HAS_EXPIRED',
      cause: expect.stringMatching(/expired/),
    });
  });

  test('is undefined for non-TLS failures and odd values', () => {
    for (const value of [
      Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }),
      new Error('plain'),
      undefined,
      null,
      'CERT_HAS_EXPIRED',
      { code: 42 },
    ])
      expect(tlsFailureOf(value)).toBeUndefined();
  });

  test('stops on a cyclic cause chain', () => {
    const a: { code?: string; cause?: unknown } = { code: 'EOTHER' };
    a.cause = a;
    expect(tlsFailureOf(a)).toBeUndefined();
  });

  test.each([
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', /UPSTREAM_CA_FILE/],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', /UPSTREAM_CA_FILE/],
    ['CERT_HAS_EXPIRED', /expired/],
    ['CERT_NOT_YET_VALID', /clock/],
    ['ERR_TLS_CERT_ALTNAME_INVALID', /UPSTREAM_BASE_URL host does not match/],
    ['ERR_SSL_WRONG_VERSION_NUMBER', /https/],
  ])('%s has a fix', (code, fix) => {
    expect(describeTlsCode(code)?.fix).toMatch(fix);
  });
});
