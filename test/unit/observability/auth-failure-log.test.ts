import { createAuthFailureLog } from '../../../src/observability/auth-failure-log';
import { memoryLogger } from '../callers/support/test-app';

describe('failed authentications are logged in aggregate', () => {
  afterEach(() => jest.useRealTimers());

  test('one line per address per interval, with its counts and the last request id; nothing for a quiet interval', () => {
    const logger = memoryLogger();
    const log = createAuthFailureLog({ logger });
    for (let i = 0; i < 500; i++) log.failed('198.51.100.7', `req-${i}`);
    log.refused('198.51.100.7', 'req-last');
    log.unverified('2001:db8::/56', 'req-v6');
    log.flush();
    expect(logger.lines.map((line) => [line.message, line.fields])).toEqual([
      [
        'failed authentications',
        expect.objectContaining({
          clientIp: '198.51.100.7',
          failed: 500,
          refused: 1,
          unverified: 0,
          lastRequestId: 'req-last',
        }),
      ],
      [
        'failed authentications',
        expect.objectContaining({ clientIp: '2001:db8::/56', failed: 0, refused: 0, unverified: 1 }),
      ],
    ]);
    log.flush();
    expect(logger.lines).toHaveLength(2);
    log.close();
  });

  test('addresses beyond the bound are summed into one line, so a spread flood cannot grow memory', () => {
    const logger = memoryLogger();
    const log = createAuthFailureLog({ logger, maxAddresses: 2 });
    for (let i = 0; i < 1000; i++) log.failed(`10.0.${i >> 8}.${i & 255}`, `req-${i}`);
    log.close();
    expect(logger.lines).toHaveLength(3);
    expect(logger.lines[2]).toMatchObject({
      message: 'failed authentications from more addresses than one interval tallies',
      fields: { failed: 998, refused: 0, unverified: 0, maxAddresses: 2 },
    });
  });

  test('the interval timer writes the lines, and close() stops it after writing what is left', () => {
    jest.useFakeTimers();
    const logger = memoryLogger();
    const log = createAuthFailureLog({ logger, intervalMs: 10_000 });
    log.failed('192.0.2.1', 'a');
    jest.advanceTimersByTime(9_999);
    expect(logger.lines).toHaveLength(0);
    jest.advanceTimersByTime(1);
    expect(logger.lines).toHaveLength(1);
    expect(logger.lines[0]!.fields).toMatchObject({ clientIp: '192.0.2.1', failed: 1, intervalSeconds: 10 });
    log.failed('192.0.2.1', 'b');
    log.close();
    expect(logger.lines).toHaveLength(2);
    log.failed('192.0.2.1', 'c');
    jest.advanceTimersByTime(60_000);
    expect(logger.lines).toHaveLength(2);
  });
});
