// Misspelled SESSION_* variables: a typo in an optional one would otherwise leave its default on without a word.

/** Edit distance (insertions, deletions, substitutions) between two names, for "did you mean". */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(
        previous[j] + 1,
        current[j - 1] + 1,
        previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    previous = current;
  }
  return previous[b.length];
}

/**
 * Unknown variables under `prefix` that look like a known one (a few letters off, or one name the start of the
 * other, as SESSION_IDLE_TIMEOUT for SESSION_IDLE_TIMEOUT_SECONDS), each with the name meant. Unrelated
 * variables that share the prefix (a desktop's SESSION_MANAGER) are left alone.
 */
export function misspelledVariables(
  env: Readonly<Record<string, string | undefined>>,
  known: readonly string[],
  prefix: string,
): { readonly variable: string; readonly meant: string }[] {
  const names = new Set(known);
  const candidates = known.filter((name) => name.startsWith(prefix));
  const found: { variable: string; meant: string }[] = [];
  for (const variable of Object.keys(env)) {
    if (!variable.startsWith(prefix) || names.has(variable) || env[variable] === undefined) continue;
    const meant = candidates.find(
      (name) =>
        distance(variable, name) <= 2 ||
        (name.startsWith(variable) && variable.length > prefix.length + 3) ||
        variable.startsWith(name),
    );
    if (meant) found.push({ variable, meant });
  }
  return found;
}
