// http_requests_total is the latency histogram's count, copied at scrape time: exact, per label set, every scrape.
import { createMetrics } from '../../../src/observability/metrics';

async function requestsTotal(metrics: ReturnType<typeof createMetrics>) {
  const text = await metrics.registry.metrics();
  return text
    .split('\n')
    .filter((line) => line.startsWith('http_requests_total{'))
    .sort();
}

describe('http_requests_total', () => {
  test('counts every observation of the latency histogram by its labels, and a second scrape does not add them again', async () => {
    const metrics = createMetrics();
    const ok = { route: 'plan', method: 'GET', status: '200', client: 'web' };
    const refused = { route: 'validation', method: 'POST', status: '429', client: 'mobile' };
    for (let i = 0; i < 3; i++) metrics.httpDuration.observe(ok, 0.002);
    metrics.httpDuration.observe(refused, 0.0005);

    const expected = [
      'http_requests_total{route="plan",method="GET",status="200",client="web"} 3',
      'http_requests_total{route="validation",method="POST",status="429",client="mobile"} 1',
    ];
    expect(await requestsTotal(metrics)).toEqual(expected);
    expect(await requestsTotal(metrics)).toEqual(expected);

    metrics.httpDuration.observe(refused, 0.0005);
    expect(await requestsTotal(metrics)).toEqual([expected[0], expected[1]?.replace(/ 1$/, ' 2')]);
    expect(await metrics.registry.metrics()).toContain('# TYPE http_requests_total counter');
  });
});
