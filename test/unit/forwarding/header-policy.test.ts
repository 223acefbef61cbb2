// The answer headers a caller gets from a provider answer: the allow-list, and the provider's Retry-After capped.
import { allowedAnswerHeaders } from '../../../src/forwarding/internal/header-policy';

const NOW = Date.parse('2026-11-25T12:00:00Z');

describe('allowedAnswerHeaders: the provider Retry-After on a forwarded answer', () => {
  test.each([
    ['3', '3'],
    ['999999', '120'],
    [new Date(NOW + 30_000).toUTCString(), '30'],
    [new Date(NOW + 86_400_000).toUTCString(), '120'],
  ])('%s reaches the caller as %s (whole seconds, at most UPSTREAM_RETRY_AFTER_MAX_SECONDS)', (raw, sent) => {
    expect(allowedAnswerHeaders({ 'retry-after': raw }, 120, NOW)['retry-after']).toBe(sent);
  });

  test.each([['-5'], ['soon'], ['0'], [new Date(NOW - 60_000).toUTCString()]])(
    '%s (negative, garbage, nothing to wait, a past date) is dropped',
    (raw) => {
      const kept = allowedAnswerHeaders({ 'retry-after': raw, 'content-type': 'application/json' }, 120, NOW);
      expect(kept).toEqual({ 'content-type': 'application/json' });
    },
  );
});
