// Structured JSON logs (pino) with every secret-bearing field redacted, batched to a file or streamed to stdout.
import { mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Paths censored wherever they appear. The gateway never logs headers or bodies on purpose;
 * this list is the safety net for an error object or a debug line that carries one.
 */
export const REDACTED_PATHS = [
  'password',
  'username',
  'access',
  'refresh',
  'token',
  'authorization',
  'apiKey',
  'encryptionKey',
  '*.password',
  '*.username',
  '*.access',
  '*.refresh',
  '*.token',
  '*.authorization',
  '*.apiKey',
  '*.encryptionKey',
  'headers.authorization',
  'headers.cookie',
  'headers["x-api-key"]',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["x-api-key"]',
  '*.headers["set-cookie"]',
  'config.headers',
  'err.config',
];

export interface LoggerOptions {
  readonly level: string;
  /** A file to append to; stdout when absent. */
  readonly file?: string;
  /** A stream to write to instead (tests capture logs this way). */
  readonly stream?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  // Stdout: asynchronous, line by line (whoever tails it sees each request at once). A LOG_FILE: see fileDestination.
  const destination =
    options.stream ??
    (options.file ? fileDestination(options.file) : pino.destination({ dest: 1, sync: false }));
  return pino(
    {
      level: options.level,
      base: { service: 'payments-bff' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      serializers: { err: serializeError },
      timestamp: isoTimestamp(),
    },
    destination,
  );
}

/**
 * Properties of an error that hold what a caller sent: body-parser attaches the raw body to its errors (`body`, up to
 * the body limit per request), and a log line must never carry a request body (issue 42), whoever wrote the error.
 */
const REQUEST_CONTENT = ['body', 'rawBody', 'headers', 'req', 'request'];
/** Where pino's error serializer puts the errors an error holds. */
const NESTED_ERRORS = ['cause', 'aggregateErrors'];

/** pino's error serializer (type, message, stack, cause chain, own fields), minus every request's content. */
export function serializeError(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error);
  return withoutRequestContent(serialized, 0);
}

/**
 * A copy without the request's content: pino hands over as they are the values that are no Error (a rejection
 * value, a plain `cause`, an AggregateError's items), and a log line must not change what the program still holds.
 */
function withoutRequestContent(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object' || depth > 8) return value;
  if (![...REQUEST_CONTENT, ...NESTED_ERRORS].some((key) => key in value)) return value;
  const record: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const key of REQUEST_CONTENT) delete record[key];
  for (const key of NESTED_ERRORS)
    if (key in record) {
      const nested = record[key];
      record[key] = Array.isArray(nested)
        ? nested.map((item) => withoutRequestContent(item, depth + 1))
        : withoutRequestContent(nested, depth + 1);
    }
  return record;
}

/**
 * pino's `isoTime` (`,"time":"<ISO 8601>"`) at a fraction of its cost (bench/README.md): Date#toISOString runs once
 * per second for the part up to the seconds, and each line appends its milliseconds. Same output, same clock.
 */
export function isoTimestamp(now: () => number = Date.now): () => string {
  let second = Number.NaN;
  let upToSeconds = ''; // ,"time":"2026-11-22T09:17:45.
  return () => {
    const time = now();
    const ms = ((time % 1000) + 1000) % 1000;
    if (time - ms !== second) {
      second = time - ms;
      upToSeconds = `,"time":"${new Date(second).toISOString().slice(0, -4)}`;
    }
    return `${upToSeconds}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
  };
}

/** Lines gather until this many bytes, then go out in one synchronous write. */
const LOG_FILE_BATCH_BYTES = 16 * 1024;
/** ...and at least this often, so a quiet gateway's lines reach the file too. */
const LOG_FILE_FLUSH_MS = 1000;
/** While the file cannot be written (disk full, say), lines wait up to this many bytes; later ones are dropped. */
const LOG_FILE_MAX_PENDING_BYTES = 8 * 1024 * 1024;

type SonicBoom = ReturnType<typeof pino.destination>;

/**
 * A LOG_FILE: lines gather in a 16 KiB batch written with one synchronous write when full, at least once a second,
 * on shutdown (flushLogger) and when the process exits for any other reason (a crash included). Under load that
 * costs less than asynchronous writes (no thread-pool round trip per batch). The batch holds bytes (sonic-boom's
 * buffer mode): as text, sonic-boom re-measures the whole pending batch on every line, so the larger the batch the
 * more each line cost; as bytes, a line costs its encoding and one copy into the batch.
 * A file that cannot be written never stops the gateway: one warning goes to stderr, lines wait (up to 8 MiB) and
 * go out with the next write that succeeds.
 */
function fileDestination(file: string): DestinationStream & { flush(done?: (error?: Error) => void): void } {
  const batch = pino.destination({
    dest: openLogFile(file),
    sync: true,
    contentMode: 'buffer',
    minLength: LOG_FILE_BATCH_BYTES,
    maxWrite: 4 * LOG_FILE_BATCH_BYTES,
    maxLength: LOG_FILE_MAX_PENDING_BYTES,
    periodicFlush: LOG_FILE_FLUSH_MS,
  });
  warnOnceOnTrouble(batch, file);
  flushOnExit(batch);
  return {
    // pino hands over text; in buffer mode sonic-boom takes bytes.
    write: (line: string) => batch.write(Buffer.from(line) as unknown as string),
    flush: (done) => batch.flush(done),
  };
}

/** A failed write or a dropped line is reported once per file on stderr (the log itself may be what is failing). */
function warnOnceOnTrouble(batch: SonicBoom, file: string): void {
  let warned = false;
  const warn = (what: string) => {
    if (warned) return;
    warned = true;
    process.stderr.write(
      `payments-bff: LOG_FILE ${file}: ${what}; lines wait in memory and may be dropped\n`,
    );
  };
  batch.on('error', (error: NodeJS.ErrnoException) => warn(`write failed (${error.code ?? error.message})`));
  batch.on('drop', () => warn(`more than ${LOG_FILE_MAX_PENDING_BYTES / 1024 / 1024} MiB unwritten`));
}

const batchesToFlushOnExit = new Set<SonicBoom>();

/** The last lines of a process that exits without a graceful shutdown (an uncaught error) still reach the file. */
function flushOnExit(batch: SonicBoom): void {
  if (batchesToFlushOnExit.size === 0) {
    process.once('exit', () => {
      for (const pending of batchesToFlushOnExit) {
        try {
          pending.flushSync();
        } catch {
          // Nothing left to tell: the process is going and the file cannot take the lines.
        }
      }
    });
  }
  batchesToFlushOnExit.add(batch);
}

function openLogFile(file: string): number {
  mkdirSync(dirname(file), { recursive: true });
  return openSync(file, 'a');
}

/** Writes out what the logger still buffers (call before the process exits). */
export function flushLogger(logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    logger.flush(() => resolve());
  });
}
