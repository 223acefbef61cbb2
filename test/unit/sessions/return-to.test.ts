// returnTo of /bff/login: only a path on the gateway's own origin, whatever the spelling of an escape attempt.
import fc from 'fast-check';
import { safeReturnTo } from '../../../src/sessions/return-to';

const ORIGIN = 'https://bff.example.test';

describe('safeReturnTo', () => {
  it.each([
    [null, '/'],
    ['', '/'],
    ['/', '/'],
    ['/orders?tab=2#top', '/orders?tab=2#top'],
    ['/a/../b', '/b'],
    ['/caf%C3%A9', '/caf%C3%A9'],
  ])('accepts %s as %s', (value, expected) => {
    expect(safeReturnTo(value, ORIGIN)).toBe(expected);
  });

  it.each([
    'https://evil.example',
    'HTTPS://evil.example',
    '//evil.example',
    '///evil.example',
    '/\\evil.example',
    '\\/evil.example',
    'javascript:alert(1)',
    'data:text/html,x',
    '/%2f%2fevil.example',
    '/%2F%2Fevil.example',
    '/%5cevil.example',
    '/%252f%252fevil.example',
    '/%25252f%25252fevil.example',
    '/%09/evil.example',
    '/\t/evil.example',
    '/\n/evil.example',
    '/ /evil.example',
    '/\u0000',
    '/%E0%A4%A',
    'evil.example',
    '.',
    '/.//evil.example',
    '/a/..//evil.example',
    '/%2e//evil.example',
  ])('refuses %j', (value) => {
    expect(safeReturnTo(value, ORIGIN)).toBeUndefined();
  });

  it.each([
    '/bff/login',
    '/bff/login?returnTo=/bff/login',
    '/BFF/Login',
    '/x/../bff/login',
    '/bff/callback?state=x',
    '/bff/logout',
    '/bff',
  ])("refuses %j: a login returning to the gateway's own /bff routes loops or spends a state", (value) => {
    expect(safeReturnTo(value, ORIGIN)).toBeUndefined();
  });

  it.each(['/bffx', '/app/bff/login', '/\u2215\u2215evil.example', '/\uFF0F\uFF0Fevil.example'])(
    'keeps %j on the origin (lookalike slashes are ordinary characters, percent-encoded)',
    (value) => {
      const result = safeReturnTo(value, ORIGIN);
      expect(result).toBeDefined();
      expect(new URL(result ?? '', 'https://other.example.test').host).toBe('other.example.test');
    },
  );

  it('refuses an overlong path', () => {
    expect(safeReturnTo(`/${'a'.repeat(3000)}`, ORIGIN)).toBeUndefined();
  });

  it('never returns anything that leaves the origin, for any input', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.webUrl(), fc.webPath(), fc.string({ unit: 'binary' })),
        (value) => {
          const result = safeReturnTo(value, ORIGIN);
          if (result === undefined) return;
          expect(result.startsWith('/')).toBe(true);
          expect(result.startsWith('//')).toBe(false);
          expect(new URL(result, ORIGIN).origin).toBe(ORIGIN);
          // What the browser will do with the Location header: stay on the origin.
          expect(new URL(result, 'https://other.example.test').host).toBe('other.example.test');
        },
      ),
      { numRuns: 2000 },
    );
  });
});
