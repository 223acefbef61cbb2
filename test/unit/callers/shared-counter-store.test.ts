// A limiter's Redis outage is told to the Redis-health owner, which alone writes the gauge and the down/up lines.

import { OutageTracker } from '../../../src/callers/shared-counter-store';
import { createMetrics } from '../../../src/observability/metrics';

function tracker() {
  const reports: string[] = [];
  const outage = new OutageTracker({
    name: 'rate limiter',
    metrics: createMetrics(),
    health: {
      reportFailure: (_error, noticedBy) => reports.push(`failure by ${noticedBy}`),
      reportSuccess: () => reports.push('success'),
    },
  });
  return { outage, reports };
}

describe('OutageTracker reports to the Redis-health owner', () => {
  test('a failed call is reported each time, naming the limiter; the recovery once, when the outage ends', () => {
    const { outage, reports } = tracker();
    outage.recovered();
    expect(reports).toEqual([]);
    outage.failed(new Error('Command timed out'));
    outage.failed(new Error('Command timed out'));
    outage.recovered();
    outage.recovered();
    expect(reports).toEqual(['failure by rate limiter', 'failure by rate limiter', 'success']);
  });

  test('a connection the owner already knows is not ready is not reported again', () => {
    const { outage, reports } = tracker();
    outage.failed(undefined);
    expect(reports).toEqual([]);
  });
});
