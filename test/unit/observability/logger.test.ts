// The LOG_FILE destination: batched synchronous writes, a flush at least once a second, nothing lost or mangled.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
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

  test('lines are batched: they wait while the batch is under 16 KiB and all go out with the line that fills it', () => {
    // Every line below has the same length (fixed fields, fixed-width time); measure it once.
    const filler = 'x'.repeat(500);
    const probe: string[] = [];
    createLogger({ level: 'info', stream: { write: (line: string) => probe.push(line) } }).info(
      { seq: 10, filler },
      'filler',
    );
    const lineBytes = Buffer.byteLength(probe[0] as string);
    const linesUnderBatch = Math.ceil((16 * 1024) / lineBytes) - 1;
    expect(linesUnderBatch * lineBytes).toBeLessThan(16 * 1024);

    const { file, logger } = fileLogger();
    for (let i = 0; i < linesUnderBatch; i++) logger.info({ seq: 10 + i, filler }, 'filler');
    expect(sizeOf(file)).toBe(0);
    logger.info({ seq: 10 + linesUnderBatch, filler }, 'filler');
    expect(sizeOf(file)).toBe((linesUnderBatch + 1) * lineBytes);
    expect(linesOf(file).map((line) => line.seq)).toEqual(
      Array.from({ length: linesUnderBatch + 1 }, (_, i) => 10 + i),
    );
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
  test('the lines logged just before an uncaught error still reach the file when the process dies', () => {
    const file = join(tempDir('bff-logger-crash-'), 'gateway.log');
    const script = [
      `const { createLogger } = require(${JSON.stringify(require.resolve('../../../src/observability/logger'))});`,
      `const logger = createLogger({ level: 'info', file: ${JSON.stringify(file)} });`,
      "for (let seq = 0; seq < 3; seq++) logger.info({ seq }, 'last words');",
      "throw new Error('crash on purpose');",
    ].join('\n');
    const crashed = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { encoding: 'utf8' });
    expect(crashed.status).toBe(1);
    expect(crashed.stderr).toContain('crash on purpose');
    expect(linesOf(file).map((line) => [line.seq, line.msg])).toEqual([
      [0, 'last words'],
      [1, 'last words'],
      [2, 'last words'],
    ]);
  });

  test('a file that cannot be written (disk full) never throws into the caller: one warning on stderr, no line in it', () => {
    const warnings: string[] = [];
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      warnings.push(String(chunk));
      return true;
    });
    try {
      // /dev/full accepts the open and fails every write with ENOSPC.
      const logger = createLogger({ level: 'info', file: '/dev/full' });
      const secretish = 'line-content-'.repeat(100);
      // Past the first batch (a failed write) and past the 8 MiB kept for later (dropped lines).
      for (let i = 0; i < 8_000; i++) expect(() => logger.info({ seq: i, secretish }, 'line')).not.toThrow();
    } finally {
      stderr.mockRestore();
    }
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/LOG_FILE \/dev\/full: write failed \(ENOSPC\)/);
    expect(warnings[0]).not.toContain('line-content');
  });
});

describe('isoTimestamp', () => {
  /** Any instant toISOString writes, four-digit and six-digit (±YYYYYY) years and before 1970 included. */
  const instant = fc.integer({
    min: Date.parse('-100000-01-01T00:00:00.000Z'),
    max: Date.parse('+100000-12-31T23:00:00.000Z'),
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

describe('errors in log lines (issue 42)', () => {
  test("never carry the request body body-parser attaches to its errors, nor one in the error's cause", () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger({ level: 'info', stream });
    const parseError = Object.assign(new Error('too many parameters'), {
      type: 'parameters.too.many',
      status: 413,
      body: 'logout_token=BODY-MARKER-1&a=1',
    });
    const wrapped = new Error('outer', {
      cause: Object.assign(new Error('inner'), { rawBody: 'BODY-MARKER-2' }),
    });
    logger.error({ err: parseError }, 'unhandled error');
    logger.error({ err: wrapped }, 'unhandled error');
    const [first, second] = lines.map((line) => JSON.parse(line) as { err: Record<string, unknown> });
    expect(first?.err).toMatchObject({ type: 'Error', message: 'too many parameters', status: 413 });
    expect(second?.err).toMatchObject({ message: expect.stringContaining('outer') });
    expect(lines.join('')).not.toMatch(/BODY-MARKER/);
  });

  test('leave the logged values themselves as they were: the line drops the body, the program keeps it (adv-42)', () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger({ level: 'info', stream });
    // A cause that is no Error (pino copies it as it is), an AggregateError's item, and a rejection value that is
    // no Error at all: before, the serializer deleted `body`, `headers` and `req` from these very objects.
    const cause = { body: 'BODY-MARKER-3', headers: { 'x-note': 'kept' }, code: 'E_CAUSE' };
    const item = { body: 'BODY-MARKER-4', code: 'E_ITEM' };
    const rejection = { body: 'BODY-MARKER-5', req: { id: 'r-1' }, code: 'E_PLAIN' };
    logger.error({ err: Object.assign(new Error('outer'), { cause }) }, 'unhandled error');
    logger.error({ err: new AggregateError([item], 'several') }, 'unhandled error');
    logger.error({ err: rejection }, 'unhandled error');
    expect(lines.join('')).not.toMatch(/BODY-MARKER/);
    expect(lines.join('')).toMatch(/E_CAUSE[\s\S]*E_ITEM[\s\S]*E_PLAIN/);
    expect(cause).toEqual({ body: 'BODY-MARKER-3', headers: { 'x-note': 'kept' }, code: 'E_CAUSE' });
    expect(item).toEqual({ body: 'BODY-MARKER-4', code: 'E_ITEM' });
    expect(rejection).toEqual({ body: 'BODY-MARKER-5', req: { id: 'r-1' }, code: 'E_PLAIN' });
  });
});
