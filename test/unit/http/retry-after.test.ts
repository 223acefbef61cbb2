// A provider's Retry-After read into a bounded pause: seconds, HTTP dates, and the hostile rest.
import { readRetryAfter } from '../../../src/http/retry-after';

const NOW = Date.parse('2026-11-25T12:00:00Z');

describe('readRetryAfter', () => {
  test.each([
    ['3', { kind: 'pause', seconds: 3, capped: false }],
    [' 10 ', { kind: 'pause', seconds: 10, capped: false }],
    ['Wed, 25 Nov 2026 12:00:07 GMT', { kind: 'pause', seconds: 7, capped: false }],
    ['999999', { kind: 'pause', seconds: 120, capped: true }],
    ['Fri, 01 Jan 2100 00:00:00 GMT', { kind: 'pause', seconds: 120, capped: true }],
    ['-5', { kind: 'ignored', why: 'negative' }],
    ['0', { kind: 'ignored', why: 'no time to wait (zero or a date already past)' }],
    [
      'Wed, 21 Oct 2015 07:28:00 GMT',
      { kind: 'ignored', why: 'no time to wait (zero or a date already past)' },
    ],
    ['1.5', { kind: 'ignored', why: 'not delay-seconds nor an HTTP date' }],
    ['soon', { kind: 'ignored', why: 'not delay-seconds nor an HTTP date' }],
    ['', { kind: 'absent' }],
  ])('%j reads as %j', (header, reading) => {
    expect(readRetryAfter(header, NOW, 120)).toEqual(reading);
  });

  test('no header at all is absent', () => {
    expect(readRetryAfter(undefined, NOW, 120)).toEqual({ kind: 'absent' });
  });
});
