// patternProperties of a response schema, run against keys a provider writes: a pattern that backtracks exponentially
// is refused when the catalogue loads, and a key too long never reaches a pattern.

/**
 * Whether a pattern repeats (`+`, `*`, `{n,}`) a group that itself holds a quantifier, an alternation or another group
 * (`(a+)+`, `(a|aa)+`, `((a+)b?)+`, `([a-z0-9]+-?)+`): the shapes that backtrack exponentially on a key that almost
 * matches. The provider writes the keys, so such a pattern is refused. A scan, not a parse: escapes and character
 * classes are skipped, so `[(+]` or `\(` are no group.
 */
function repeatsAComplexGroup(pattern: string): boolean {
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
      if (complex && /^(?:[+*]|\{\d+,)/.test(pattern.slice(i + 1))) return true;
    } else if (c === '|' || c === '+' || c === '*' || c === '?' || c === '{') markTop();
  }
  return false;
}

/** Keys longer than this never match a pattern (undeclared): a pattern's work on a provider's key stays bounded. */
export const MAX_PATTERN_KEY_LENGTH = 256;

/** The pattern as a RegExp (unicode mode, as JSON Schema reads it); throws, naming it, when it is refused. */
export function compileKeyPattern(pattern: string): RegExp {
  if (repeatsAComplexGroup(pattern))
    throw new Error(
      `patternProperties ${JSON.stringify(pattern)}: a repeated group holding a quantifier, an alternation or a group is refused (it backtracks exponentially on a provider's key)`,
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
