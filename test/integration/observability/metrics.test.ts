// /metrics after real traffic: the documented names and label sets, bounded labels, and no secret anywhere.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { loadConfig } from '../../../src/config/load-config';
import { type RunningGateway, startGateway } from '../../../src/gateway';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import {
  API_KEY,
  captureLogs,
  gatewayEnv,
  LIMITED_KEY,
  PASSWORD,
  PLAN_ID,
  USERNAME,
} from '../../support/ops-fixture';
import { type RedisServer, startRedisServer } from '../../support/redis-server';

interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** Prometheus text format, one sample a line (label values here never hold commas or quotes). */
function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`unparsable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

const find = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

describe('Prometheus metrics after real traffic', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  let gateway: RunningGateway;
  let text: string;
  let samples: Sample[];
  const randomPlanIds = [randomUUID(), randomUUID(), randomUUID()];
  const randomPaths = [`/nonexistent/${randomUUID()}`, `/nonexistent/${randomUUID()}`];
  const logs = captureLogs();

  beforeAll(async () => {
    redis = await startRedisServer();
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    const config = loadConfig(gatewayEnv(simulator.url, { REDIS_URL: redis.url }));
    gateway = await startGateway(config, { logStream: logs.stream });
    const get = (path: string, key?: string) =>
      fetch(gateway.url + path, { headers: key ? { 'x-api-key': key } : {} });

    expect((await get(`/api/subscriptions/plan/${PLAN_ID}`, API_KEY)).status).toBe(200);
    expect((await get(`/api/subscriptions/plan/${PLAN_ID}`, API_KEY)).status).toBe(200);
    for (const id of randomPlanIds) await get(`/api/subscriptions/plan/${id}`, API_KEY);
    for (const path of randomPaths) expect((await get(path, API_KEY)).status).toBe(404);
    expect((await get(`/api/subscriptions/plan/${PLAN_ID}`)).status).toBe(401);
    const validation = await fetch(`${gateway.url}/api/validation/document`, {
      method: 'POST',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } }),
    });
    expect(validation.status).toBe(200);
    const limited = [];
    for (let i = 0; i < 3; i++)
      limited.push((await get(`/api/subscriptions/plan/${PLAN_ID}`, LIMITED_KEY)).status);
    expect(limited).toEqual([200, 200, 429]);

    const scrape = await get('/metrics');
    expect(scrape.status).toBe(200);
    expect(scrape.headers.get('content-type')).toMatch(/^text\/plain/);
    text = await scrape.text();
    samples = parseMetrics(text);
  });

  afterAll(async () => {
    await gateway?.shutdown();
    await simulator?.close();
    await redis?.stop();
  });

  test('default process metrics are exported', () => {
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
    ])
      expect(find(samples, name).length).toBeGreaterThan(0);
  });

  test('http_requests_total and the latency histogram carry route, method, status and client', () => {
    const labels = { route: 'plan', method: 'GET', status: '200', client: 'ops-client' };
    expect(find(samples, 'http_requests_total', labels)[0]?.value).toBeGreaterThanOrEqual(2);
    expect(find(samples, 'http_request_duration_seconds_count', labels)[0]?.value).toBeGreaterThanOrEqual(2);
    expect(find(samples, 'http_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toHaveLength(1);
    expect(
      find(samples, 'http_requests_total', { route: 'validation', method: 'POST', status: '200' }),
    ).toHaveLength(1);
    expect(find(samples, 'http_requests_total', { status: '401', client: 'anonymous' })).toHaveLength(1);
    expect(find(samples, 'http_requests_total', { route: 'unmatched', status: '404' })[0]?.value).toBe(2);
    expect(find(samples, 'http_requests_total', { client: 'ops-limited', status: '429' })).toHaveLength(1);
  });

  test('upstream latency by route and status', () => {
    const series = find(samples, 'upstream_request_duration_seconds_count', { route: 'plan', status: '200' });
    expect(series[0]?.value).toBeGreaterThanOrEqual(1);
    for (const s of find(samples, 'upstream_request_duration_seconds_count'))
      expect(Object.keys(s.labels).sort()).toEqual(['account', 'route', 'status']);
  });

  test('token logins by result and the source of each token', () => {
    expect(
      find(samples, 'upstream_token_requests_total', { kind: 'login', result: 'success' })[0]?.value,
    ).toBe(1);
    expect(simulator.stats().logins).toBe(1);
    expect(
      find(samples, 'upstream_token_source_total', { source: 'upstream' })[0]?.value,
    ).toBeGreaterThanOrEqual(1);
    expect(
      find(samples, 'upstream_token_source_total', { source: 'memory' })[0]?.value,
    ).toBeGreaterThanOrEqual(1);
  });

  test('rate-limit rejections by client, circuit state and store health', () => {
    expect(find(samples, 'rate_limit_rejections_total', { client: 'ops-limited' })[0]?.value).toBe(1);
    expect(find(samples, 'upstream_circuit_state', { operation: 'validation' })[0]?.value).toBe(0);
    expect(find(samples, 'upstream_circuit_state', { operation: 'plan' })[0]?.value).toBe(0);
    expect(find(samples, 'token_store_healthy')[0]?.value).toBe(1);
    expect(text).toContain('# TYPE token_store_errors_total counter');
  });

  test('labels stay bounded: no raw path, no plan id', () => {
    for (const id of [...randomPlanIds, PLAN_ID]) expect(text).not.toContain(id);
    expect(text).not.toContain('/nonexistent');
    expect(text).not.toContain('/api/');
    const routes = new Set(samples.map((s) => s.labels.route).filter((r) => r !== undefined));
    for (const route of routes)
      expect(['plan', 'validation', 'unmatched', 'healthz', 'readyz', 'metrics', 'openapi']).toContain(route);
  });

  test('no secret in /metrics: no password, API key, username or JWT', () => {
    for (const secret of [PASSWORD, API_KEY, LIMITED_KEY, USERNAME, 'eyJ'])
      expect(text).not.toContain(secret);
  });
});

describe('METRICS_PORT', () => {
  let simulator: RunningSimulator;
  let gateway: RunningGateway;

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    const config = loadConfig(
      gatewayEnv(simulator.url, {
        METRICS_PORT: '0',
        SERVER_HEADERS_TIMEOUT_MS: '1000',
        SERVER_REQUEST_TIMEOUT_MS: '1000',
      }),
    );
    gateway = await startGateway(config, { logStream: captureLogs().stream });
  });

  afterAll(async () => {
    await gateway?.shutdown();
    await simulator?.close();
  });

  test('a listener of its own serves /metrics and the main port answers 404', async () => {
    expect(gateway.metricsUrl).toBeDefined();
    expect(gateway.metricsUrl).not.toBe(gateway.url);
    const own = await fetch(`${gateway.metricsUrl}/metrics`);
    expect(own.status).toBe(200);
    expect(await own.text()).toContain('# TYPE http_requests_total counter');
    expect((await fetch(`${gateway.url}/metrics`)).status).toBe(404);
    expect((await fetch(`${gateway.metricsUrl}/readyz`)).status).toBe(404);
  });

  test('a client whose headers never end is cut at SERVER_HEADERS_TIMEOUT_MS, as on the main port (not Node’s minute)', async () => {
    const { hostname, port } = new URL(gateway.metricsUrl ?? '');
    const socket = connect({ host: hostname, port: Number(port) });
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => undefined);
    socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n');
    // Bounded: Node's default would keep the connection open for 60 s.
    const closed = await Promise.race([
      once(socket, 'close').then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 8_000)),
    ]);
    socket.destroy();
    expect(closed).toBe(true);
    expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 408 /);
  });
});
