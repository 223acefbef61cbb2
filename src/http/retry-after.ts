// Reads a provider's Retry-After (RFC 9110 §10.2.3: delay-seconds or an HTTP date) into a bounded pause.

export type RetryAfterReading =
  | { readonly kind: 'pause'; readonly seconds: number; readonly capped: boolean }
  /** Absent: the 429 said nothing of when to come back (AIMD takes over). */
  | { readonly kind: 'absent' }
  /** Present but unusable (garbage, a date in the past, zero or negative): ignored, logged by the caller. */
  | { readonly kind: 'ignored'; readonly why: string };

const DELAY_SECONDS = /^\d{1,10}$/;
/** IMF-fixdate and the two obsolete forms RFC 9110 still asks recipients to accept; Date.parse reads all three. */
const HTTP_DATE =
  /^[A-Za-z]{3,9}, ?[0-9]{1,2}[ -][A-Za-z]{3}[ -][0-9]{2,4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$|^[A-Za-z]{3} [A-Za-z]{3} +[0-9]{1,2} [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}$/;

/**
 * The pause a Retry-After asks for, at most `maxSeconds`. A value of 0 (or a date already past) asks for no pause at
 * all, so it is read as "no usable Retry-After": the rate is lowered instead of pausing for nothing.
 */
export function readRetryAfter(
  header: string | readonly string[] | number | undefined,
  nowMs: number,
  maxSeconds: number,
): RetryAfterReading {
  if (header === undefined) return { kind: 'absent' };
  const raw = (typeof header === 'number' ? String(header) : Array.isArray(header) ? header[0] : header) as
    | string
    | undefined;
  const text = raw?.trim() ?? '';
  if (text === '') return { kind: 'absent' };
  let seconds: number;
  if (DELAY_SECONDS.test(text)) seconds = Number(text);
  else if (/^-\d+$/.test(text)) return { kind: 'ignored', why: 'negative' };
  else if (HTTP_DATE.test(text) && Number.isFinite(Date.parse(text)))
    seconds = Math.ceil((Date.parse(text) - nowMs) / 1000);
  else return { kind: 'ignored', why: 'not delay-seconds nor an HTTP date' };
  if (seconds <= 0) return { kind: 'ignored', why: 'no time to wait (zero or a date already past)' };
  if (seconds > maxSeconds) return { kind: 'pause', seconds: maxSeconds, capped: true };
  return { kind: 'pause', seconds, capped: false };
}
