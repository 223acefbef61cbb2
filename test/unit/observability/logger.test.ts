// The LOG_FILE destination: batched synchronous writes, a flush at least once a second, nothing lost or mangled.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { createLogger, flushLogger, isoTimestamp } from '../../../src/observability/logger';
import { tempDir } from '../../support/temp-dir';

function fileLogger() {
  const file = join(tempDir('bff-logger-'), 'logs', 'gateway.log');
  return { file, logger: createLogger({ level: 'info', file }) };
}

function sizeOf(file: string): number {
  return existsSync(file) ? statSync(file).size : 0;
}

function linesOf(file: string): Array<Record<string, unknown>> {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('LOG_FILE destination', () => {
  test('creates the directory and holds every line intact and in order, multi-byte text included, after flushLogger', async () => {
    const { file, logger } = fileLogger();
    // Several batches' worth, with characters of 2, 3 and 4 bytes so characters and bytes differ.
    const count = 3000;
    for (let i = 0; i < count; i++) logger.info({ seq: i, note: `señal ${i} € 🙂` }, 'request');
    await flushLogger(logger);

    const lines = linesOf(file);
    expect(lines).toHaveLength(count);
    lines.forEach((line, i) => {
      expect(line.seq).toBe(i);
      expect(line.note).toBe(`señal ${i} € 🙂`);
      expect(line.msg).toBe('request');
      expect(line.service).toBe('payments-bff');
    });
  });

  test('lines are batched: one line waits, a full batch (16 KiB) is written at once', async () => {
    const { file, logger } = fileLogger();
    logger.info({ seq: 0 }, 'first');
    expect(sizeOf(file)).toBe(0);

    const filler = 'x'.repeat(1000);
    for (let i = 1; i <= 17; i++) logger.info({ seq: i, filler }, 'filler');
    expect(sizeOf(file)).toBeGreaterThan(16 * 1024);
    await flushLogger(logger);
    expect(linesOf(file).map((line) => line.seq)).toEqual([...Array(18).keys()]);
  });

  test('a quiet logger still gets its lines to the file within about a second, with no flush and no more lines', async () => {
    const { file, logger } = fileLogger();
    logger.info({ seq: 1 }, 'lonely line');
    expect(sizeOf(file)).toBe(0);
    const deadline = Date.now() + 5_000;
    while (sizeOf(file) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(linesOf(file).map((line) => line.msg)).toEqual(['lonely line']);
  });

  test('secret-bearing fields are redacted in the file too', async () => {
    const { file, logger } = fileLogger();
    logger.info(
      {
        password: 'hunter2-secret',
        token: { access: 'eyJ-access-secret' },
        headers: { authorization: 'Bearer s3cr3t' },
      },
      'careless line',
    );
    await flushLogger(logger);
    const text = readFileSync(file, 'utf8');
    for (const secret of ['hunter2-secret', 'eyJ-access-secret', 's3cr3t'])
      expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
  });
});

describe('isoTimestamp', () => {
  /** Any instant toISOString writes with a four-digit year (0000-9999), before 1970 included. */
  const instant = fc.integer({
    min: Date.parse('0000-01-01T00:00:00.000Z'),
    max: Date.parse('9999-12-31T23:00:00.000Z'),
  });

  test("writes pino's isoTime for every instant, whatever the order of the calls", () => {
    fc.assert(
      fc.property(
        fc.array(instant, { minLength: 1, maxLength: 20 }),
        fc.nat({ max: 2_500 }),
        (starts, step) => {
          // Runs of nearby instants (same second, next millisecond, next second) and jumps between runs.
          const times = starts.flatMap((start) => [start, start + step, start + step + 1, start + 2 * step]);
          let i = 0;
          const timestamp = isoTimestamp(() => times[i] as number);
          for (i = 0; i < times.length; i++)
            expect(timestamp()).toBe(`,"time":"${new Date(times[i] as number).toISOString()}"`);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('a logged line carries the current time in ISO 8601', async () => {
    const { file, logger } = fileLogger();
    const before = Date.now();
    logger.info('now');
    await flushLogger(logger);
    const [line] = linesOf(file);
    expect(line?.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(line?.time as string)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(line?.time as string)).toBeLessThanOrEqual(Date.now());
  });
});
