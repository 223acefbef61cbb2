// Calendar periods (day, month) in an IANA timezone: when each begins and ends, daylight-saving right, from Intl.
// Intl is enough here (no dependency): the only question asked of it is "what is the wall-clock time at instant t".

export type PeriodKind = 'day' | 'month';

export interface CalendarPeriod {
  readonly kind: PeriodKind;
  /** `2026-11-25` for a day, `2026-11` for a month, in the period's timezone. */
  readonly id: string;
  /** First instant of the period (ms since the epoch). */
  readonly startsAt: number;
  /** First instant of the next period: midnight of the last day's end there, whatever the period's length. */
  readonly endsAt: number;
}

/** Raised for a name Intl does not know; the message names it, and the caller adds whose it is. */
export class UnknownTimeZoneError extends Error {
  constructor(readonly timeZone: string) {
    super(`unknown timezone "${timeZone}" (an IANA name such as "America/Sao_Paulo" or "UTC")`);
    this.name = 'UnknownTimeZoneError';
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** One formatter per timezone (they are costly to build); throws {@link UnknownTimeZoneError} for unknown names. */
function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    try {
      formatter = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
      });
    } catch {
      throw new UnknownTimeZoneError(timeZone);
    }
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/** Throws {@link UnknownTimeZoneError} unless Intl knows the name. */
export function assertTimeZone(timeZone: string): void {
  formatterFor(timeZone);
}

interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function wallClockAt(instant: number, timeZone: string): WallClock {
  const fields: Record<string, number> = {};
  for (const part of formatterFor(timeZone).formatToParts(instant))
    if (part.type !== 'literal') fields[part.type] = Number(part.value);
  return {
    year: fields.year ?? 0,
    month: fields.month ?? 0,
    day: fields.day ?? 0,
    hour: fields.hour ?? 0,
    minute: fields.minute ?? 0,
    second: fields.second ?? 0,
  };
}

/** The zone's offset from UTC at `instant`, in ms (wall clock minus UTC), to the second. */
function offsetAt(instant: number, timeZone: string): number {
  const wall = wallClockAt(instant, timeZone);
  const asUtc = Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second);
  return asUtc - Math.floor(instant / 1000) * 1000;
}

/** Days are compared as `y*10000 + m*100 + d`. */
function dateNumber(wall: { year: number; month: number; day: number }): number {
  return wall.year * 10_000 + wall.month * 100 + wall.day;
}

/**
 * The instant the calendar date `year-month-day` begins in `timeZone`: its local midnight or, when a
 * daylight-saving change skips midnight, the end of the gap. When midnight happens twice (clocks turned back to
 * 23:00 of the day before), the later one: until then the wall clock still shows the previous date.
 */
export function startOfDate(year: number, month: number, day: number, timeZone: string): number {
  const guess = Date.UTC(year, month - 1, day);
  const target = dateNumber({ year, month, day });
  const offsets = new Set([
    offsetAt(guess - 86_400_000, timeZone),
    offsetAt(guess, timeZone),
    offsetAt(guess + 86_400_000, timeZone),
  ]);
  let best = Number.NaN;
  for (const offset of offsets) {
    const candidate = guess - offset;
    const wall = wallClockAt(candidate, timeZone);
    const isMidnight = wall.hour === 0 && wall.minute === 0 && wall.second === 0;
    if (isMidnight && dateNumber(wall) === target && !(candidate <= best)) best = candidate;
  }
  if (!Number.isNaN(best)) return best;
  return firstInstantOnOrAfter(target, guess - 86_400_000 - 14 * 3_600_000, guess + 86_400_000, timeZone);
}

/** Midnight fell in a gap: the first instant whose wall-clock date is `target` (search to the ms). */
function firstInstantOnOrAfter(target: number, low: number, high: number, timeZone: string): number {
  let before = low;
  let after = high;
  while (after - before > 1) {
    const middle = Math.floor((before + after) / 2);
    if (dateNumber(wallClockAt(middle, timeZone)) >= target) after = middle;
    else before = middle;
  }
  return after;
}

const pad = (value: number, width = 2) => String(value).padStart(width, '0');

/** The day or month containing `instant` in `timeZone`. */
export function periodAt(kind: PeriodKind, instant: number, timeZone: string): CalendarPeriod {
  const wall = wallClockAt(instant, timeZone);
  if (kind === 'day') {
    const next = new Date(Date.UTC(wall.year, wall.month - 1, wall.day + 1));
    return {
      kind,
      id: `${pad(wall.year, 4)}-${pad(wall.month)}-${pad(wall.day)}`,
      startsAt: startOfDate(wall.year, wall.month, wall.day, timeZone),
      endsAt: startOfDate(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), timeZone),
    };
  }
  const next = new Date(Date.UTC(wall.year, wall.month, 1));
  return {
    kind,
    id: `${pad(wall.year, 4)}-${pad(wall.month)}`,
    startsAt: startOfDate(wall.year, wall.month, 1, timeZone),
    endsAt: startOfDate(next.getUTCFullYear(), next.getUTCMonth() + 1, 1, timeZone),
  };
}

/** The UTC calendar day of `instant` (`YYYY-MM-DD`): the ledger's day. */
export function utcDay(instant: number): string {
  return new Date(instant).toISOString().slice(0, 10);
}
