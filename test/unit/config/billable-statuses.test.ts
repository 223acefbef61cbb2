// An account's billable set: classes, codes and exclusions compiled into a lookup; the default is the provider's usual
// terms (2xx, and 4xx other than 401, 403 and 429).
import { billablePredicate, billableProblems, DEFAULT_BILLABLE } from '../../../src/config/billable-statuses';

const billableOf = (entries?: readonly string[]) => {
  const isBillable = billablePredicate(entries);
  return [200, 204, 300, 400, 401, 403, 404, 409, 429, 500, 503].filter(isBillable);
};

describe('billable statuses', () => {
  test('the default: 2xx and 4xx other than 401, 403, 429; never 3xx or 5xx', () => {
    expect(billableOf()).toEqual([200, 204, 400, 404, 409]);
    expect(billableOf(DEFAULT_BILLABLE)).toEqual([200, 204, 400, 404, 409]);
  });

  test('classes, codes and exclusions of either', () => {
    expect(billableOf(['2xx'])).toEqual([200, 204]);
    expect(billableOf(['2xx', '404'])).toEqual([200, 204, 404]);
    expect(billableOf(['2xx', '5xx', '!503'])).toEqual([200, 204, 500]);
    expect(billableOf(['2xx', '4xx', '!4xx', '409'])).toEqual([200, 204]);
  });

  test('statuses outside 200-599 and non-integers are never billable', () => {
    const isBillable = billablePredicate(['2xx', '4xx', '5xx']);
    for (const status of [0, 100, 199, 600, 999, -1, 200.5, Number.NaN])
      expect(isBillable(status)).toBe(false);
  });

  test('problems: bad entries by position, duplicates, exclusions only, too many', () => {
    expect(billableProblems(['2xx', '4xx', '!401'])).toEqual([]);
    expect(billableProblems(['2xx', 'xx', 204, '!6xx'])).toEqual([
      '[1] must be a status class ("2xx".."5xx") or code ("404"), optionally preceded by "!" to exclude it',
      '[2] must be a status class ("2xx".."5xx") or code ("404"), optionally preceded by "!" to exclude it',
      '[3] must be a status class ("2xx".."5xx") or code ("404"), optionally preceded by "!" to exclude it',
    ]);
    expect(billableProblems(['404', '404'])).toEqual(['[1] "404" appears twice']);
    expect(billableProblems(['!4xx'])).toEqual([
      'must include at least one class or code (only exclusions bill nothing)',
    ]);
    // Found by the adversarial read: a list whose exclusions cover its inclusions bills nothing, silently.
    for (const list of [
      ['2xx', '!2xx'],
      ['404', '!4xx'],
      ['2xx', '!200', '!2xx'],
    ])
      expect(billableProblems(list)).toEqual([
        'excludes every status it includes (["2xx", "!2xx"] bills nothing): quotas would never be spent',
      ]);
    expect(billableProblems(['2xx', '!204'])).toEqual([]);
    expect(billableProblems(Array.from({ length: 33 }, (_, i) => String(200 + i)))).toEqual([
      'at most 32 entries',
    ]);
  });
});
