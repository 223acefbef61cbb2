// The reads in flight by key (plan id), for coalescing: a fixed table of buckets whose entries leave with their read.
import { randomInt } from 'node:crypto';

/** A power of two: the bucket is the hash's low bits. Far above the reads one replica has in flight at a time. */
const BUCKETS = 4096;

/** One read in flight: opened before the read starts (its value is set right after), closed when it settles. */
export interface InFlightRead<T> {
  readonly key: string;
  value: T | undefined;
  next: InFlightRead<T> | undefined;
}

/**
 * Neither a Map nor a dictionary object, which is what a unique-id read (nobody to share with) pays for: a
 * dictionary object internalizes every key (a copy of each caller-chosen id in the old generation, freed only by a
 * full collection: ~70 bytes and ~1 µs per read), and a Map replaces its table as entries come and go and keeps the
 * old table pointing at the new one, so a promoted table keeps every later read alive through young-generation
 * collections (bench/README.md, "What was made lean"). This table is allocated once (per change of the account's
 * credentials: answer-reader.ts); an entry is one small object
 * that is unlinked when its read settles. The hash is seeded per process, so callers cannot aim their ids at one
 * bucket; a bucket never holds more entries than there are reads in flight (bounded by the upstream pool and its
 * queue) in any case.
 */
export class InFlightReads<T> {
  private readonly buckets: (InFlightRead<T> | undefined)[] = new Array<InFlightRead<T> | undefined>(
    BUCKETS,
  ).fill(undefined);
  private readonly seed = randomInt(0x7fffffff);

  get(key: string): T | undefined {
    for (let entry = this.buckets[this.bucketOf(key)]; entry; entry = entry.next)
      if (entry.key === key) return entry.value;
    return undefined;
  }

  /**
   * A new entry for `key` (the caller checked that none is in flight), linked before the read starts: a read that
   * fails at once still finds its own entry to close.
   */
  open(key: string): InFlightRead<T> {
    const bucket = this.bucketOf(key);
    const entry: InFlightRead<T> = { key, value: undefined, next: this.buckets[bucket] };
    this.buckets[bucket] = entry;
    return entry;
  }

  /** Unlinks `entry` (and no other read's); closing it twice is harmless. */
  close(entry: InFlightRead<T>): void {
    const bucket = this.bucketOf(entry.key);
    let previous: InFlightRead<T> | undefined;
    for (let at = this.buckets[bucket]; at; previous = at, at = at.next) {
      if (at !== entry) continue;
      if (previous) previous.next = at.next;
      else this.buckets[bucket] = at.next;
      return;
    }
  }

  /** FNV-1a over the UTF-16 code units, from the process's seed. */
  private bucketOf(key: string): number {
    let hash = this.seed;
    for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
    return (hash ^ (hash >>> 16)) & (BUCKETS - 1);
  }
}
