// The in-flight table behind coalescing: entries are found by key until closed, and closing one never drops another.
import { randomUUID } from 'node:crypto';
import { InFlightReads } from '../../../src/forwarding/internal/in-flight-reads';

describe('in-flight reads', () => {
  it('finds an open entry by key, and nothing once it is closed', () => {
    const table = new InFlightReads<string>();
    const id = randomUUID();
    expect(table.get(id)).toBeUndefined();
    const entry = table.open(id);
    entry.value = 'answer';
    expect(table.get(id)).toBe('answer');
    table.close(entry);
    expect(table.get(id)).toBeUndefined();
    table.close(entry); // twice: harmless
    expect(table.get(id)).toBeUndefined();
  });

  it('keeps 10,000 reads apart (more than its buckets) and closes each one alone', () => {
    const table = new InFlightReads<number>();
    const ids = Array.from({ length: 10_000 }, () => randomUUID());
    const entries = ids.map((id, i) => {
      const entry = table.open(id);
      entry.value = i;
      return entry;
    });
    expect(ids.every((id, i) => table.get(id) === i)).toBe(true);
    // Close every other one, in an order unlike the opening order: the rest stay found.
    for (let i = entries.length - 2; i >= 0; i -= 2) table.close(entries[i] as (typeof entries)[number]);
    expect(ids.every((id, i) => table.get(id) === (i % 2 === 0 ? undefined : i))).toBe(true);
  });

  it('compares whole keys: ids that differ in one character are different reads', () => {
    const table = new InFlightReads<string>();
    const id = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
    const near = 'b8546575-5d4f-4a56-9e21-522d01cf5993';
    table.open(id).value = 'a';
    expect(table.get(near)).toBeUndefined();
    table.open(near).value = 'b';
    expect([table.get(id), table.get(near)]).toEqual(['a', 'b']);
  });
});
