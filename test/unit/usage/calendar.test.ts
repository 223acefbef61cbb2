import { assertTimeZone, periodAt, UnknownTimeZoneError, utcDay } from '../../../src/usage/internal/calendar';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const HOUR = 3_600_000;

describe('calendar periods', () => {
  test('a UTC month ends at midnight of its last day, whatever its length', () => {
    expect(iso(periodAt('month', at('2026-01-15T10:00:00Z'), 'UTC').endsAt)).toBe('2026-02-01T00:00:00.000Z');
    expect(iso(periodAt('month', at('2026-04-30T23:59:59Z'), 'UTC').endsAt)).toBe('2026-05-01T00:00:00.000Z');
    expect(iso(periodAt('month', at('2026-02-10T00:00:00Z'), 'UTC').endsAt)).toBe('2026-03-01T00:00:00.000Z');
    expect(iso(periodAt('month', at('2026-12-31T12:00:00Z'), 'UTC').endsAt)).toBe('2027-01-01T00:00:00.000Z');
    expect(periodAt('month', at('2026-12-31T12:00:00Z'), 'UTC').id).toBe('2026-12');
  });

  test('a leap year February has 29 days, the leap day its own day', () => {
    const february = periodAt('month', at('2028-02-29T12:00:00Z'), 'UTC');
    expect(february.id).toBe('2028-02');
    expect((february.endsAt - february.startsAt) / (24 * HOUR)).toBe(29);
    const leapDay = periodAt('day', at('2028-02-29T23:00:00Z'), 'UTC');
    expect(leapDay.id).toBe('2028-02-29');
    expect(iso(leapDay.endsAt)).toBe('2028-03-01T00:00:00.000Z');
  });

  test('west of UTC (Sao Paulo, UTC-3): the day and month end at local midnight, 03:00 UTC', () => {
    const lateEvening = at('2026-11-30T23:30:00-03:00');
    const day = periodAt('day', lateEvening, 'America/Sao_Paulo');
    expect(day.id).toBe('2026-11-30');
    expect(iso(day.endsAt)).toBe('2026-12-01T03:00:00.000Z');
    expect(periodAt('month', lateEvening, 'America/Sao_Paulo').id).toBe('2026-11');
    expect(periodAt('month', lateEvening, 'UTC').id).toBe('2026-12');
  });

  test('east of UTC (Kolkata, UTC+5:30): the day ends at 18:30 UTC the day before', () => {
    const day = periodAt('day', at('2026-03-01T20:00:00Z'), 'Asia/Kolkata');
    expect(day.id).toBe('2026-03-02');
    expect(iso(day.startsAt)).toBe('2026-03-01T18:30:00.000Z');
    expect(iso(day.endsAt)).toBe('2026-03-02T18:30:00.000Z');
  });

  test('spring forward: the day of the change is 23 hours long (New York, Berlin)', () => {
    const newYork = periodAt('day', at('2026-03-08T12:00:00Z'), 'America/New_York');
    expect((newYork.endsAt - newYork.startsAt) / HOUR).toBe(23);
    expect(iso(newYork.endsAt)).toBe('2026-03-09T04:00:00.000Z');
    const berlin = periodAt('day', at('2026-03-29T12:00:00Z'), 'Europe/Berlin');
    expect((berlin.endsAt - berlin.startsAt) / HOUR).toBe(23);
  });

  test('fall back: the day of the change is 25 hours long, and so is its month by an hour', () => {
    const newYork = periodAt('day', at('2026-11-01T12:00:00Z'), 'America/New_York');
    expect((newYork.endsAt - newYork.startsAt) / HOUR).toBe(25);
    const berlin = periodAt('day', at('2026-10-25T12:00:00Z'), 'Europe/Berlin');
    expect((berlin.endsAt - berlin.startsAt) / HOUR).toBe(25);
    const october = periodAt('month', at('2026-10-10T12:00:00Z'), 'Europe/Berlin');
    expect((october.endsAt - october.startsAt) / HOUR).toBe(31 * 24 + 1);
    expect(iso(october.endsAt)).toBe('2026-10-31T23:00:00.000Z');
  });

  test('a change at midnight: the day starts when the gap ends (Sao Paulo, 4 Nov 2018, 00:00 -> 01:00)', () => {
    const before = periodAt('day', at('2018-11-03T12:00:00-03:00'), 'America/Sao_Paulo');
    expect(iso(before.endsAt)).toBe('2018-11-04T03:00:00.000Z');
    const changeDay = periodAt('day', at('2018-11-04T12:00:00-02:00'), 'America/Sao_Paulo');
    expect(changeDay.startsAt).toBe(before.endsAt);
    expect((changeDay.endsAt - changeDay.startsAt) / HOUR).toBe(23);
  });

  test('clocks turned back at midnight: the day before lasts 25 hours (Sao Paulo, 16 Feb 2019)', () => {
    const day = periodAt('day', at('2019-02-16T12:00:00-02:00'), 'America/Sao_Paulo');
    expect(day.id).toBe('2019-02-16');
    expect((day.endsAt - day.startsAt) / HOUR).toBe(25);
    expect(iso(day.endsAt)).toBe('2019-02-17T03:00:00.000Z');
  });

  test('east of UTC with daylight saving in the south (Sydney): the change day is 23 hours', () => {
    const day = periodAt('day', at('2026-10-04T06:00:00Z'), 'Australia/Sydney');
    expect(day.id).toBe('2026-10-04');
    expect((day.endsAt - day.startsAt) / HOUR).toBe(23);
  });

  test('a skipped date (Apia, 30 Dec 2011): the day before ends where the next one begins', () => {
    const day = periodAt('day', at('2011-12-29T12:00:00-10:00'), 'Pacific/Apia');
    expect(day.id).toBe('2011-12-29');
    expect(iso(day.endsAt)).toBe('2011-12-30T10:00:00.000Z');
    expect(periodAt('day', day.endsAt, 'Pacific/Apia').id).toBe('2011-12-31');
  });

  test('each period begins where the previous ended, over a year of days', () => {
    let instant = at('2026-01-01T05:00:00Z');
    for (let i = 0; i < 366; i++) {
      const day = periodAt('day', instant, 'America/New_York');
      expect(periodAt('day', day.endsAt, 'America/New_York').startsAt).toBe(day.endsAt);
      expect(periodAt('day', day.endsAt - 1, 'America/New_York').id).toBe(day.id);
      instant = day.endsAt;
    }
  });

  test('an unknown timezone is a clear error naming it', () => {
    expect(() => assertTimeZone('Mars/Olympus_Mons')).toThrow(UnknownTimeZoneError);
    expect(() => periodAt('day', 0, 'Mars/Olympus_Mons')).toThrow(/unknown timezone "Mars\/Olympus_Mons"/);
    expect(() => assertTimeZone('America/Sao_Paulo')).not.toThrow();
  });

  test('the ledger day is the UTC date', () => {
    expect(utcDay(at('2026-11-25T23:59:59.999Z'))).toBe('2026-11-25');
  });
});
