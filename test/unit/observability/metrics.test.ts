// http_requests_total is the latency histogram's count copied at scrape time; the token time left is read at scrape time.
import { GatewayError } from '../../../src/http/gateway-error';
import { createMetrics, registerAccessTokenTimeLeft } from '../../../src/observability/metrics';
import { resultOf } from '../../../src/tokens/internal/token-endpoint';

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

describe('upstream_access_token_remaining_seconds', () => {
  const sample = async (metrics: ReturnType<typeof createMetrics>) =>
    (await metrics.registry.metrics())
      .split('\n')
      .find((line) => line.startsWith('upstream_access_token_remaining_seconds{'));

  test('is the time left on the held token, read when scraped, and 0 when none is held or it expired', async () => {
    const metrics = createMetrics();
    let now = 1_000_000;
    let expiresAt: number | undefined;
    registerAccessTokenTimeLeft(
      metrics,
      () => expiresAt,
      () => now,
    );
    // A second account's reading joins the same gauge; dropping it removes its series.
    const dropSandbox = registerAccessTokenTimeLeft(metrics, () => undefined, undefined, 'sandbox');
    expect(await metrics.registry.metrics()).toContain(
      'upstream_access_token_remaining_seconds{account="sandbox"} 0',
    );
    dropSandbox();
    expect(await metrics.registry.metrics()).not.toContain('account="sandbox"');

    expect(await sample(metrics)).toBe('upstream_access_token_remaining_seconds{account="default"} 0');
    expiresAt = now + 299_500;
    expect(await sample(metrics)).toBe('upstream_access_token_remaining_seconds{account="default"} 299.5');
    now += 240_000;
    expect(await sample(metrics)).toBe('upstream_access_token_remaining_seconds{account="default"} 59.5');
    now += 120_000;
    expect(await sample(metrics)).toBe('upstream_access_token_remaining_seconds{account="default"} 0');
    expect(await metrics.registry.metrics()).toContain(
      '# TYPE upstream_access_token_remaining_seconds gauge',
    );
  });
});

describe('upstream_token_requests_total', () => {
  test("exports every failure reason of an account's token calls at 0 before the first call, so increase() sees the first one", async () => {
    const metrics = createMetrics();
    metrics.zeroTokenRequests('sandbox');
    const text = await metrics.registry.metrics();
    for (const kind of ['login', 'refresh'])
      for (const reason of [
        'UPSTREAM_AUTH_FAILED',
        'UPSTREAM_IP_NOT_WHITELISTED',
        'UPSTREAM_UNAVAILABLE',
        'UPSTREAM_TIMEOUT',
      ] as const) {
        const result = resultOf(new GatewayError(reason, 'test'));
        expect(text).toContain(
          `upstream_token_requests_total{kind="${kind}",result="${result}",account="sandbox"} 0\n`,
        );
      }
  });
});
