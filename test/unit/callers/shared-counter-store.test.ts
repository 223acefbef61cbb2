// A limiter's Redis outage is told to the Redis-health owner, which alone writes the gauge and the down/up lines.

import { OutageTracker } from '../../../src/callers/shared-counter-store';
import { createMetrics } from '../../../src/observability/metrics';

function tracker() {
  const reports: string[] = [];
  const logs: string[] = [];
  const outage = new OutageTracker({
    name: 'rate limiter',
    metrics: createMetrics(),
    logger: {
      warn: (_o: object, m: string) => logs.push(m),
      info: (_o: object, m: string) => logs.push(m),
      error: (_o: object, m: string) => logs.push(m),
    },
    health: { reportFailure: () => reports.push('failure'), reportSuccess: () => reports.push('success') },
  });
  return { outage, reports, logs };
}

describe('OutageTracker reports to the Redis-health owner', () => {
  test('a failed call is reported each time; the recovery once, when the outage ends', () => {
    const { outage, reports, logs } = tracker();
    outage.recovered();
    expect(reports).toEqual([]);
    outage.failed(new Error('Command timed out'));
    outage.failed(new Error('Command timed out'));
    outage.recovered();
    outage.recovered();
    expect(reports).toEqual(['failure', 'failure', 'success']);
    expect(logs).toHaveLength(2);
  });

  test('a connection the owner already knows is not ready is not reported again', () => {
    const { outage, reports } = tracker();
    outage.failed(undefined, 'reconnecting');
    expect(reports).toEqual([]);
  });
});
