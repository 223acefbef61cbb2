// The leak scan itself: it finds secrets (verbatim, JSON-escaped, percent-encoded) and JWTs, and says where
// without repeating the secret.
import { assertNoSecrets, findSecrets } from '../support/leak-scan';

const SECRET = 'p@ss"word/with-specials';
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJ0b2tlbl90eXBlIjoiYWNjZXNzIn0.c2lnbmF0dXJl';

describe('assertNoSecrets', () => {
  it('passes clean texts', () => {
    expect(() => assertNoSecrets(['{"status":"ok"}', 'Bearer [redacted]'], [SECRET])).not.toThrow();
  });

  it('names where a secret appears in any form, never the secret', () => {
    const texts = [
      { where: 'replica 1 logs', text: `line one\n{"password":"${SECRET}"}` },
      { where: 'answer body', text: JSON.stringify({ detail: SECRET }) },
      { where: 'a URL', text: `/x?q=${encodeURIComponent(SECRET)}` },
    ];
    const findings = findSecrets(texts, [{ name: 'the upstream password', value: SECRET }]);
    expect(findings).toEqual([
      'the upstream password appears in replica 1 logs (line 2, column 14)',
      'the upstream password appears in answer body (line 1, column 12)',
      'the upstream password appears in a URL (line 1, column 6)',
    ]);
    let message = '';
    try {
      assertNoSecrets(texts, [SECRET]);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('secret #1 appears in replica 1 logs');
    expect(message).not.toContain(SECRET);
    expect(message).not.toContain(encodeURIComponent(SECRET));
  });

  it('flags anything shaped like a JWT, even when the token is unknown', () => {
    expect(() => assertNoSecrets([{ where: '/metrics', text: `token="${JWT}"` }], [])).toThrow(
      /a JWT-looking string appears in \/metrics \(line 1, column 8\)/,
    );
    expect(() => assertNoSecrets([`Bearer ${JWT}`], [])).not.toThrow(new RegExp(JWT));
  });

  it('refuses to scan for a secret too short to mean anything', () => {
    expect(() => assertNoSecrets(['x'], ['abc'])).toThrow(/too short/);
  });
});
