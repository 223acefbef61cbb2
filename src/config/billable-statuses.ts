// An account's `"billable"` (SPEC §11): which final provider answers the provider bills, as a short list of status
// classes and codes, each optionally excluded with "!". Validated at load; compiled once into a table lookup.

/** The provider's usual terms: 2xx, and 4xx other than 401, 403 and 429. */
export const DEFAULT_BILLABLE: readonly string[] = ['2xx', '4xx', '!401', '!403', '!429'];

/** "2xx" (a class), "404" (a code), "!401" / "!4xx" (an exclusion); provider answers are 200-599. */
const ENTRY = /^!?[2-5](?:xx|[0-9]{2})$/;
export const MAX_BILLABLE_ENTRIES = 32;

/** What is wrong with a list (empty: nothing); messages name the entry's position, never more than it. */
export function billableProblems(entries: readonly unknown[]): string[] {
  const problems: string[] = [];
  if (entries.length > MAX_BILLABLE_ENTRIES) problems.push(`at most ${MAX_BILLABLE_ENTRIES} entries`);
  const seen = new Set<string>();
  entries.forEach((entry, index) => {
    if (typeof entry !== 'string' || !ENTRY.test(entry))
      problems.push(
        `[${index}] must be a status class ("2xx".."5xx") or code ("404"), optionally preceded by "!" to exclude it`,
      );
    else if (seen.has(entry)) problems.push(`[${index}] "${entry}" appears twice`);
    else seen.add(entry);
  });
  if (problems.length === 0 && !entries.some((entry) => !(entry as string).startsWith('!')))
    problems.push('must include at least one class or code (only exclusions bill nothing)');
  else if (problems.length === 0 && !billsAnything(entries as string[]))
    problems.push(
      'excludes every status it includes (["2xx", "!2xx"] bills nothing): quotas would never be spent',
    );
  return problems;
}

function billsAnything(entries: readonly string[]): boolean {
  const billable = billablePredicate(entries);
  for (let status = 200; status < 600; status++) if (billable(status)) return true;
  return false;
}

function matches(entry: string, status: number): boolean {
  const body = entry.startsWith('!') ? entry.slice(1) : entry;
  return body.endsWith('xx') ? Math.floor(status / 100) === Number(body[0]) : status === Number(body);
}

/**
 * The predicate of a validated list: billable when an entry includes the status and none excludes it. A table of
 * the 600 statuses, built once per account: a request pays an index, never a parse.
 */
export function billablePredicate(
  entries: readonly string[] = DEFAULT_BILLABLE,
): (status: number) => boolean {
  const table = new Uint8Array(600);
  const includes = entries.filter((e) => !e.startsWith('!'));
  const excludes = entries.filter((e) => e.startsWith('!'));
  for (let status = 200; status < 600; status++)
    table[status] =
      includes.some((e) => matches(e, status)) && !excludes.some((e) => matches(e, status)) ? 1 : 0;
  return (status) => table[status] === 1;
}
