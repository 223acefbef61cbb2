// patternProperties of a response schema, run against keys a provider writes: a pattern that backtracks exponentially
// is refused when the catalogue loads, and a key too long never reaches a pattern.

/** More unbounded quantifiers than this (`+`, `*`, `{n,}`) in one pattern: `^.*.*.*$` is cubic in the key's length. */
const MAX_UNBOUNDED_QUANTIFIERS = 2;

/**
 * Why a pattern backtracks badly on a key that almost matches (undefined: it does not): it repeats (`+`, `*`, `{n}`,
 * `{n,}`) a group that itself holds a quantifier, an alternation or another group (`(a+)+`, `(a|aa){40}`, `((a+)b?)+`,
 * `([a-z0-9]+-?)+`: exponential), or it has more than MAX_UNBOUNDED_QUANTIFIERS unbounded quantifiers (polynomial of
 * a higher degree). The provider writes the keys, so such a pattern is refused. A scan, not a parse: escapes and
 * character classes are skipped, so `[(+]` or `\(` are no group.
 */
function backtracksBadly(pattern: string): string | undefined {
  let unbounded = 0;
  const open: boolean[] = []; // per open group: whether it holds a quantifier, `|` or a group
  const markTop = () => {
    if (open.length > 0) open[open.length - 1] = true;
  };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') i++;
    else if (c === '[') {
      for (i++; i < pattern.length && pattern[i] !== ']'; i++) if (pattern[i] === '\\') i++;
    } else if (c === '(') {
      markTop();
      open.push(false);
      // `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?<name>`: group syntax, not a quantifier.
      const syntax = /^\?(?::|=|!|<=|<!|<[^>]*>)/.exec(pattern.slice(i + 1));
      if (syntax) i += syntax[0].length;
    } else if (c === ')') {
      const complex = open.pop() ?? false;
      if (complex && /^(?:[+*]|\{\d+)/.test(pattern.slice(i + 1)))
        return 'a repeated group holding a quantifier, an alternation or a group (exponential on a near-match)';
    } else if (c === '|' || c === '+' || c === '*' || c === '?' || c === '{') {
      markTop();
      if (c === '+' || c === '*' || (c === '{' && /^\{\d+,\}/.test(pattern.slice(i)))) unbounded++;
    }
  }
  return unbounded > MAX_UNBOUNDED_QUANTIFIERS
    ? `more than ${MAX_UNBOUNDED_QUANTIFIERS} unbounded quantifiers (polynomial of a higher degree)`
    : undefined;
}

/** Keys longer than this never match a pattern (undeclared): a pattern's work on a provider's key stays bounded. */
export const MAX_PATTERN_KEY_LENGTH = 256;

/** The pattern as a RegExp (unicode mode, as JSON Schema reads it); throws, naming it, when it is refused. */
export function compileKeyPattern(pattern: string): RegExp {
  const backtracking = backtracksBadly(pattern);
  if (backtracking)
    throw new Error(
      `patternProperties ${JSON.stringify(pattern)}: ${backtracking} is refused (it backtracks on a provider's key)`,
    );
  try {
    return new RegExp(pattern, 'u');
  } catch (error) {
    throw new Error(`patternProperties ${JSON.stringify(pattern)}: ${(error as Error).message}`);
  }
}

/** Whether `pattern` matches `key`: never for a key longer than MAX_PATTERN_KEY_LENGTH (it stays undeclared). */
export function keyMatches(pattern: RegExp, key: string): boolean {
  return key.length <= MAX_PATTERN_KEY_LENGTH && pattern.test(key);
}
