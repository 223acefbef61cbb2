// OpenTelemetry traces of real gateway processes, exported over OTLP/HTTP to a loopback receiver that decodes them
// (issue 21): the span tree under the caller's trace, no trace header to the provider unless asked, no secret or
// id in any span, the trace id in the request log lines, the flush at shutdown, and no SDK at all when off.
import { readFileSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { type GatewayProcess, startGatewayProcess } from '../../support/gateway-process';
import { findSecrets } from '../../support/leak-scan';
import { API_KEY, PASSWORD, PLAN_ID, USERNAME, writeClientsFile } from '../../support/ops-fixture';
import {
  attribute,
  type ExportedSpan,
  type OtlpReceiver,
  startOtlpReceiver,
} from '../../support/otlp-receiver';
import { freePort, waitFor } from '../../support/ports';
import { tempDir } from '../../support/temp-dir';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;
const DOCUMENT_ID = '20-17254359-7';
const POISON_PLAN = '0d5c0c8e-1111-4a56-9e21-522d01cf5992';
const OTHER_PLAN = '3f2c9a1e-7b4d-4e8a-9c61-0d5e2f7a8b90';
const COLLECTOR_SECRET = 'collector-api-key-7f3a9c';
const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

/**
 * Writes, at exit, which modules the process loaded and which module first required each: proof that a gateway
 * without traces never loads the SDK.
 */
function moduleReport(): { nodeOptions: string; loaded(): string[]; loadedBy(): Record<string, string> } {
  const dir = tempDir('bff-traces-');
  const hook = join(dir, 'report-modules.cjs');
  const out = join(dir, 'modules.json');
  writeFileSync(
    hook,
    `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify(Object.fromEntries(Object.values(require.cache).map((m) => [m.id, m.parent ? m.parent.id : ''])))));\n`,
  );
  const loadedBy = () => JSON.parse(readFileSync(out, 'utf8')) as Record<string, string>;
  return { nodeOptions: `--require ${hook}`, loaded: () => Object.keys(loadedBy()), loadedBy };
}

function requestLines(gateway: GatewayProcess): Record<string, unknown>[] {
  return gateway
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === 'request');
}

/** A gateway over the simulator with the test's clients file, plus `extra`. */
function gatewayEnv(simulator: RunningSimulator, clientsFile: string, extra: Record<string, string>) {
  return {
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
    ...extra,
  };
}

const childrenOf = (spans: ExportedSpan[], parent: ExportedSpan) =>
  spans.filter((s) => s.traceId === parent.traceId && s.parentSpanId === parent.spanId);

/** Every span under `root`, however deep (span trees are a few levels, so this stays small). */
const descendantsOf = (spans: ExportedSpan[], root: ExportedSpan): ExportedSpan[] =>
  childrenOf(spans, root).flatMap((child) => [child, ...descendantsOf(spans, child)]);

describe('OpenTelemetry traces', () => {
  let receiver: OtlpReceiver;
  let simulator: RunningSimulator;
  let clientsFile: string;
  let traced: GatewayProcess;
  let propagating: GatewayProcess;

  const env = (extra: Record<string, string>) => gatewayEnv(simulator, clientsFile, extra);

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    clientsFile = writeClientsFile();
    simulator.setFaults({ failIds: [POISON_PLAN] });
    const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY: '50' };
    [traced, propagating] = await Promise.all([
      startGatewayProcess({ env: env({ ...tracing, OTEL_SERVICE_NAME: 'bff-traced' }) }),
      startGatewayProcess({
        env: env({ ...tracing, OTEL_SERVICE_NAME: 'bff-propagating', UPSTREAM_PROPAGATE_TRACE: 'true' }),
      }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([traced?.stop(), propagating?.stop()]);
    await simulator?.close();
    await receiver?.close();
  });

  const getPlan = (gateway: GatewayProcess, headers: Record<string, string>, plan = PLAN_ID) =>
    fetch(`${gateway.url}/api/subscriptions/plan/${plan}`, { headers: { 'x-api-key': API_KEY, ...headers } });

  /** The finished server span of the request the caller tagged with `requestId`, once exported. */
  async function serverSpanOf(service: string, requestId: string, gateway: GatewayProcess) {
    let traceId: string | undefined;
    await waitFor(
      () => {
        traceId = requestLines(gateway).find((line) => line.requestId === requestId)?.traceId as string;
        return (
          traceId !== undefined &&
          receiver.spans().some((s) => s.service === service && s.kind === SERVER && s.traceId === traceId)
        );
      },
      { what: `the server span of ${requestId}` },
    );
    const spans = receiver.spans().filter((s) => s.traceId === traceId);
    const server = spans.find((s) => s.kind === SERVER && s.service === service) as ExportedSpan;
    return { server, spans, traceId: traceId as string };
  }

  it("puts a request's authentication, token and upstream call under one server span in the caller's trace", async () => {
    const answer = await getPlan(traced, { traceparent: TRACEPARENT, 'x-request-id': 'trace-tree-1' });
    expect(answer.status).toBe(200);
    const { server, spans } = await serverSpanOf('bff-traced', 'trace-tree-1', traced);

    expect(server.traceId).toBe(CALLER_TRACE);
    expect(server.parentSpanId).toBe(CALLER_SPAN);
    // The route template names the span: the plan id in the path is in no span.
    expect(server.name).toBe('GET /api/subscriptions/plan/:internalId');
    expect(attribute(server, 'http.route')).toBe('/api/subscriptions/plan/:internalId');
    expect(attribute(server, 'http.response.status_code')).toBe(200);
    expect(attribute(server, 'gateway.client')).toBe('ops-client');
    expect(server.status?.code ?? 0).not.toBe(ERROR);

    // The spans of the upstream call and the token may be exported a batch after the server span.
    await waitFor(() => childrenOf(receiver.spans(), server).length >= 3, { what: 'the child spans' });
    const children = childrenOf(receiver.spans(), server);
    expect(children.map((s) => s.name).sort()).toEqual(['authenticate', 'token', 'upstream']);
    const upstream = children.find((s) => s.name === 'upstream') as ExportedSpan;
    expect(upstream.kind).toBe(CLIENT);
    expect(attribute(upstream, 'http.request.method')).toBe('GET');
    expect(attribute(upstream, 'http.response.status_code')).toBe(200);
    // The first call of a cold gateway logs in: the token span says so, with the login as its child.
    const token = children.find((s) => s.name === 'token') as ExportedSpan;
    expect(attribute(token, 'gateway.token.source')).toBe('upstream');
    await waitFor(() => childrenOf(receiver.spans(), token).some((s) => s.name === 'token.login'), {
      what: 'the login span',
    });
    expect(childrenOf(receiver.spans(), token).map((s) => s.name)).toEqual(
      expect.arrayContaining(['token.store.read', 'token.login']),
    );
    expect(spans.every((s) => s.service === 'bff-traced')).toBe(true);
  });

  it('says where a warm token came from: memory, with no token call under it', async () => {
    await getPlan(traced, { 'x-request-id': 'trace-warm-0' }); // a token is held from here on
    const answer = await getPlan(traced, { 'x-request-id': 'trace-warm-1' });
    expect(answer.status).toBe(200);
    const { server } = await serverSpanOf('bff-traced', 'trace-warm-1', traced);
    // A request without a traceparent starts a trace of its own.
    expect(server.traceId).not.toBe(CALLER_TRACE);
    expect(server.parentSpanId ?? '').toBe('');
    await waitFor(() => childrenOf(receiver.spans(), server).some((s) => s.name === 'token'), {
      what: 'the token span',
    });
    const token = childrenOf(receiver.spans(), server).find((s) => s.name === 'token') as ExportedSpan;
    expect(attribute(token, 'gateway.token.source')).toBe('memory');
    expect(childrenOf(receiver.spans(), token)).toEqual([]);
  });

  it('marks a 5xx answer as an error of the server span, and a refused caller as an error of authentication only', async () => {
    expect(
      (await getPlan(traced, { 'x-request-id': 'trace-5xx' }, POISON_PLAN)).status,
    ).toBeGreaterThanOrEqual(500);
    const failing = await serverSpanOf('bff-traced', 'trace-5xx', traced);
    expect(failing.server.status?.code).toBe(ERROR);
    await waitFor(() => childrenOf(receiver.spans(), failing.server).some((s) => s.name === 'upstream'), {
      what: 'the failed upstream span',
    });
    const upstream = childrenOf(receiver.spans(), failing.server).find((s) => s.name === 'upstream');
    expect(upstream?.status?.code).toBe(ERROR);
    expect(attribute(upstream as ExportedSpan, 'error.type')).toBe('upstream_status');

    const refused = await getPlan(traced, {
      'x-api-key': 'not-a-valid-key-at-all',
      'x-request-id': 'trace-401',
    });
    expect(refused.status).toBe(401);
    // A failed authentication has no request line of its own (the aggregated failure line speaks for it).
    const isRefusal = (s: ExportedSpan) =>
      s.service === 'bff-traced' && s.kind === SERVER && attribute(s, 'http.response.status_code') === 401;
    await waitFor(() => receiver.spans().some(isRefusal), { what: 'the server span of the 401' });
    const unauthenticated = { server: receiver.spans().find(isRefusal) as ExportedSpan };
    // A 4xx is the caller's problem: the server span stays unset (OpenTelemetry HTTP conventions).
    expect(unauthenticated.server.status?.code ?? 0).not.toBe(ERROR);
    await waitFor(() => childrenOf(receiver.spans(), unauthenticated.server).length > 0, {
      what: 'the authentication span',
    });
    const children = childrenOf(receiver.spans(), unauthenticated.server);
    expect(children.map((s) => s.name)).toEqual(['authenticate']);
    expect(children[0]?.status?.code).toBe(ERROR);
    expect(attribute(children[0] as ExportedSpan, 'error.type')).toBe('CLIENT_UNAUTHENTICATED');
  });

  it('ignores a malformed traceparent: the request is served in a trace of its own', async () => {
    const answer = await getPlan(traced, {
      traceparent: '00-zzzz-not-a-trace-01',
      'x-request-id': 'trace-garbage',
    });
    expect(answer.status).toBe(200);
    const { server } = await serverSpanOf('bff-traced', 'trace-garbage', traced);
    expect(server.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(server.parentSpanId ?? '').toBe('');
  });

  it('starts a trace of its own for every traceparent the W3C rules refuse; takes a later version as its parent', async () => {
    const refused: Record<string, Record<string, string>> = {
      'zero-trace': { traceparent: `00-${'0'.repeat(32)}-${CALLER_SPAN}-01` },
      'zero-span': { traceparent: `00-${CALLER_TRACE}-${'0'.repeat(16)}-01` },
      'version-ff': { traceparent: `ff-${CALLER_TRACE}-${CALLER_SPAN}-01` },
      'upper-case': { traceparent: TRACEPARENT.toUpperCase() },
      'v00-with-more': { traceparent: `${TRACEPARENT}-extra` },
      repeated: { traceparent: `${TRACEPARENT}, 00-${'1'.repeat(32)}-${CALLER_SPAN}-01` },
    };
    for (const [name, headers] of Object.entries(refused)) {
      const requestId = `hostile-${name}`;
      expect((await getPlan(traced, { ...headers, 'x-request-id': requestId })).status).toBe(200);
      const { server } = await serverSpanOf('bff-traced', requestId, traced);
      expect({ name, trace: server.traceId, parent: server.parentSpanId ?? '' }).toEqual({
        name,
        trace: expect.not.stringMatching(new RegExp(`^(${CALLER_TRACE}|0+)$`)),
        parent: '',
      });
    }
    // An 8 KB tracestate (the W3C limit is 512 characters) is dropped, the valid traceparent beside it honoured.
    const huge = {
      traceparent: TRACEPARENT,
      tracestate: `k=${'v'.repeat(8000)}`,
      'x-request-id': 'hostile-huge',
    };
    expect((await getPlan(traced, huge)).status).toBe(200);
    const withHuge = await serverSpanOf('bff-traced', 'hostile-huge', traced);
    expect([withHuge.server.traceId, withHuge.server.parentSpanId]).toEqual([CALLER_TRACE, CALLER_SPAN]);
    // A version after 00 may carry more fields: its first four are honoured (W3C forward compatibility).
    expect(
      (
        await getPlan(traced, {
          traceparent: `01-${CALLER_TRACE}-${CALLER_SPAN}-01-more`,
          'x-request-id': 'hostile-v01',
        })
      ).status,
    ).toBe(200);
    const { server } = await serverSpanOf('bff-traced', 'hostile-v01', traced);
    expect([server.traceId, server.parentSpanId]).toEqual([CALLER_TRACE, CALLER_SPAN]);
  });

  it('sends no trace header to the provider by default, and the upstream span as parent with UPSTREAM_PROPAGATE_TRACE', async () => {
    await getPlan(traced, { traceparent: TRACEPARENT, 'x-request-id': 'propagate-off' });
    await getPlan(propagating, { traceparent: TRACEPARENT, 'x-request-id': 'propagate-on' });
    const received = (id: string) =>
      simulator.receivedRequests().find((r) => r.headers['x-request-id'] === id);
    expect(received('propagate-off')?.headers).toBeDefined();
    expect(received('propagate-off')?.headers.traceparent).toBeUndefined();
    expect(received('propagate-off')?.headers.tracestate).toBeUndefined();

    const { server } = await serverSpanOf('bff-propagating', 'propagate-on', propagating);
    await waitFor(() => childrenOf(receiver.spans(), server).some((s) => s.name === 'upstream'), {
      what: 'the upstream span',
    });
    const upstream = childrenOf(receiver.spans(), server).find((s) => s.name === 'upstream') as ExportedSpan;
    expect(received('propagate-on')?.headers.traceparent).toBe(`00-${CALLER_TRACE}-${upstream.spanId}-01`);
  });

  it('sends no trace header to the token endpoint, with UPSTREAM_PROPAGATE_TRACE or without', async () => {
    const before = simulator.receivedTokenRequests().length;
    // Every token dies: each gateway's next request logs in again inside the caller's trace.
    simulator.revokeTokens();
    for (const [gateway, service] of [
      [traced, 'bff-traced'],
      [propagating, 'bff-propagating'],
    ] as const) {
      const requestId = `token-calls-${service}`;
      expect((await getPlan(gateway, { traceparent: TRACEPARENT, 'x-request-id': requestId })).status).toBe(
        200,
      );
      const { server } = await serverSpanOf(service, requestId, gateway);
      // The token calls were made under the request's span: a login (cold, or renewing after the revocation).
      await waitFor(() => descendantsOf(receiver.spans(), server).some((s) => s.name === 'token.login'), {
        what: 'the login under the request',
      });
    }
    const tokenCalls = simulator.receivedTokenRequests().slice(before);
    expect(tokenCalls.filter((r) => r.path === '/api/token/').length).toBeGreaterThanOrEqual(2);
    for (const call of tokenCalls) {
      expect(call.headers.traceparent).toBeUndefined();
      expect(call.headers.tracestate).toBeUndefined();
    }
    // The positive control: the same request's operation call did carry the trace with propagation on.
    const operation = simulator
      .receivedRequests()
      .find((r) => r.headers['x-request-id'] === 'token-calls-bff-propagating');
    expect(operation?.headers.traceparent).toMatch(new RegExp(`^00-${CALLER_TRACE}-`));
  });

  it("never hands the caller's tracestate to the provider, even with UPSTREAM_PROPAGATE_TRACE", async () => {
    // A caller's vendor entries (tenant, user, ...) are the caller's business, not the provider's.
    const tracestate = 'caller-vendor=tenant-4711,other@vendor=user-42';
    await getPlan(propagating, { traceparent: TRACEPARENT, tracestate, 'x-request-id': 'tracestate-on' });
    const received = simulator.receivedRequests().find((r) => r.headers['x-request-id'] === 'tracestate-on');
    expect(received?.headers.traceparent).toMatch(new RegExp(`^00-${CALLER_TRACE}-[0-9a-f]{16}-01$`));
    expect(received?.headers.tracestate).toBeUndefined();
  });

  it('traces no probe or scrape, with a query string or without', async () => {
    for (const path of ['/healthz', '/healthz?probe=kubelet', '/readyz?verbose=1', '/metrics?name[]=up'])
      expect((await fetch(`${traced.url}${path}`)).status).toBe(200);
    // Spans are exported in the order they end: the marker's server span comes after any probe's.
    await getPlan(traced, { 'x-request-id': 'after-probes' });
    await serverSpanOf('bff-traced', 'after-probes', traced);
    const probeRoutes = ['/healthz', '/readyz', '/metrics'];
    expect(receiver.spans().filter((s) => probeRoutes.includes(String(attribute(s, 'http.route'))))).toEqual(
      [],
    );
  });

  it("says on the server span that a plan read shared another request's upstream call (no token or upstream span of its own)", async () => {
    simulator.setFaults({ failIds: [POISON_PLAN], latencyMs: 400 });
    try {
      const leader = getPlan(traced, { 'x-request-id': 'coalesce-leader' });
      // The follower arrives while the leader's upstream call is in flight (the simulator holds it 400 ms).
      await waitFor(
        () =>
          simulator.stats().requests > 0 &&
          simulator.receivedRequests().some((r) => r.headers['x-request-id'] === 'coalesce-leader'),
        {
          what: 'the leader upstream',
        },
      );
      const follower = getPlan(traced, { 'x-request-id': 'coalesce-follower' });
      expect((await leader).status).toBe(200);
      expect((await follower).status).toBe(200);
    } finally {
      simulator.setFaults({ failIds: [POISON_PLAN] });
    }
    const leader = await serverSpanOf('bff-traced', 'coalesce-leader', traced);
    const follower = await serverSpanOf('bff-traced', 'coalesce-follower', traced);
    expect(requestLines(traced).find((line) => line.requestId === 'coalesce-follower')?.coalesced).toBe(true);
    await waitFor(() => childrenOf(receiver.spans(), leader.server).some((s) => s.name === 'upstream'), {
      what: "the leader's upstream span",
    });
    expect(attribute(leader.server, 'gateway.coalesced')).toBeUndefined();
    expect(attribute(follower.server, 'gateway.coalesced')).toBe(true);
    expect(childrenOf(receiver.spans(), follower.server).map((s) => s.name)).toEqual(['authenticate']);
  });

  it("puts a joined token flight's calls under the request that started it, and none under the one that joined", async () => {
    // A cold gateway: its first two requests both need a token; the login is held 400 ms so the second joins it.
    const cold = await startGatewayProcess({
      env: env({
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_SERVICE_NAME: 'bff-cold',
      }),
    });
    const before = simulator.receivedTokenRequests().length;
    simulator.setFaults({ failIds: [POISON_PLAN], latencyMs: 400, includeTokenEndpoints: true });
    try {
      const first = getPlan(cold, { traceparent: TRACEPARENT, 'x-request-id': 'flight-starter' });
      await waitFor(() => simulator.receivedTokenRequests().length > before, { what: 'the login in flight' });
      const joiner = `00-${'5'.repeat(32)}-${CALLER_SPAN}-01`;
      // Another plan: the same one would share the first request's upstream call, token and all.
      const second = getPlan(cold, { traceparent: joiner, 'x-request-id': 'flight-joiner' }, OTHER_PLAN);
      expect([(await first).status, (await second).status]).toEqual([200, 200]);
    } finally {
      simulator.setFaults({ failIds: [POISON_PLAN] });
    }
    try {
      expect(simulator.receivedTokenRequests().length - before).toBe(1);
      const starter = await serverSpanOf('bff-cold', 'flight-starter', cold);
      const joined = await serverSpanOf('bff-cold', 'flight-joiner', cold);
      expect(joined.traceId).toBe('5'.repeat(32));
      const tokenOf = (server: ExportedSpan) =>
        childrenOf(receiver.spans(), server).find((s) => s.name === 'token');
      await waitFor(() => tokenOf(starter.server) !== undefined && tokenOf(joined.server) !== undefined, {
        what: 'both token spans',
      });
      const starterToken = tokenOf(starter.server) as ExportedSpan;
      const joinedToken = tokenOf(joined.server) as ExportedSpan;
      await waitFor(() => childrenOf(receiver.spans(), starterToken).some((s) => s.name === 'token.login'), {
        what: 'the login under the starter',
      });
      expect(attribute(joinedToken, 'gateway.token.source')).toBe('upstream');
      expect(childrenOf(receiver.spans(), joinedToken)).toEqual([]);
      const logins = receiver.spans().filter((s) => s.service === 'bff-cold' && s.name === 'token.login');
      expect(logins.map((s) => s.parentSpanId)).toEqual([starterToken.spanId]);
    } finally {
      await cold.stop();
    }
  }, 40_000);

  it('writes the trace id in every request log line', async () => {
    await getPlan(traced, { traceparent: TRACEPARENT, 'x-request-id': 'trace-log' });
    await waitFor(() => requestLines(traced).some((line) => line.requestId === 'trace-log'), {
      what: 'the request line',
    });
    expect(requestLines(traced).find((line) => line.requestId === 'trace-log')?.traceId).toBe(CALLER_TRACE);
    const lines = requestLines(traced);
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(line.traceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it('exports no secret, token, API key, document id or plan id in any span', async () => {
    const validation = await fetch(`${traced.url}/api/validation/document`, {
      method: 'POST',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json', 'x-request-id': 'trace-doc' },
      body: JSON.stringify({ country: 'ARG', document: { id: DOCUMENT_ID, type: 'CUIT' } }),
    });
    expect(validation.status).toBe(200);
    await serverSpanOf('bff-traced', 'trace-doc', traced);
    const bodies = receiver.bodies();
    expect(bodies.length).toBeGreaterThan(0);
    // The access tokens the gateway sent the provider, as the provider received them.
    const accessTokens = simulator
      .receivedRequests()
      .map((r) => String(r.headers.authorization ?? '').replace(/^Bearer /, ''))
      .filter((token) => token.length > 0);
    expect(accessTokens.length).toBeGreaterThan(0);
    const leaks = findSecrets(
      bodies.map((text, i) => ({ where: `OTLP export #${i + 1}`, text })),
      [
        { name: 'the API key', value: API_KEY },
        { name: 'the upstream password', value: PASSWORD },
        { name: 'the upstream username', value: USERNAME },
        { name: 'the document id', value: DOCUMENT_ID },
        { name: 'the plan id', value: PLAN_ID },
        { name: 'the poison plan id', value: POISON_PLAN },
        { name: 'the other plan id', value: OTHER_PLAN },
        { name: 'the refused API key', value: 'not-a-valid-key-at-all' },
        ...accessTokens.map((value, i) => ({ name: `upstream access token #${i + 1}`, value })),
      ],
    );
    expect(leaks).toEqual([]);
  });
});

describe('OpenTelemetry traces at shutdown and when off', () => {
  let receiver: OtlpReceiver;
  let simulator: RunningSimulator;
  let clientsFile: string;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    clientsFile = writeClientsFile();
  });

  afterAll(async () => {
    await simulator?.close();
    await receiver?.close();
  });

  const env = (extra: Record<string, string>) => gatewayEnv(simulator, clientsFile, extra);
  const getPlan = (gateway: GatewayProcess) =>
    fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
      headers: { 'x-api-key': API_KEY, traceparent: TRACEPARENT },
    });

  it('exports the spans still buffered when the gateway stops (SIGTERM)', async () => {
    const modules = moduleReport();
    const gateway = await startGatewayProcess({
      env: env({
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        // Far beyond the test: only the shutdown's flush can export these spans.
        OTEL_BSP_SCHEDULE_DELAY: '600000',
        OTEL_SERVICE_NAME: 'bff-flushed',
        NODE_OPTIONS: modules.nodeOptions,
      }),
    });
    expect((await getPlan(gateway)).status).toBe(200);
    expect(receiver.spans().filter((s) => s.service === 'bff-flushed')).toEqual([]);
    expect(await gateway.stop()).toBe(0);
    const names = receiver
      .spans()
      .filter((s) => s.service === 'bff-flushed')
      .map((s) => s.name);
    expect(names).toEqual(expect.arrayContaining(['GET /api/subscriptions/plan/:internalId', 'upstream']));
    // The positive control of the next test: a traced gateway does load the SDK.
    expect(modules.loaded().some((path) => path.includes('@opentelemetry/sdk-trace'))).toBe(true);
  }, 30_000);

  it('traces the refresh before expiry as a trace of its own, not under the request that obtained the token', async () => {
    const shortLived = await startSimulator({
      port: 0,
      username: USERNAME,
      password: PASSWORD,
      accessTtlSeconds: 4,
    });
    const gateway = await startGatewayProcess({
      env: {
        ...env({
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          OTEL_BSP_SCHEDULE_DELAY: '20',
          OTEL_SERVICE_NAME: 'bff-refreshing',
          TOKEN_REFRESH_SKEW_SECONDS: '2',
        }),
        UPSTREAM_BASE_URL: shortLived.url,
      },
    });
    try {
      expect((await getPlan(gateway)).status).toBe(200);
      const isRefresh = (s: ExportedSpan) =>
        s.service === 'bff-refreshing' && s.name === 'token.background_refresh';
      await waitFor(() => receiver.spans().some(isRefresh), {
        timeoutMs: 15_000,
        what: 'the background refresh',
      });
      const refresh = receiver.spans().find(isRefresh) as ExportedSpan;
      expect(refresh.parentSpanId ?? '').toBe('');
      expect(refresh.traceId).not.toBe(CALLER_TRACE);
      await waitFor(() => childrenOf(receiver.spans(), refresh).some((s) => s.name === 'token.refresh'), {
        what: 'the refresh call under it',
      });
    } finally {
      await gateway.stop();
      await shortLived.close();
    }
  }, 40_000);

  it('serves and stops gracefully while the collector hangs: the last export is given up, not waited out', async () => {
    // Accepts connections and never answers: an export waits for its timeout (60 s here), longer than the 20 s after
    // which the test harness kills the process; a graceful exit (code 0) shows the shutdown gave the export up.
    const hung = createNetServer(() => undefined);
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    const port = (hung.address() as AddressInfo).port;
    try {
      const gateway = await startGatewayProcess({
        env: env({
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
          OTEL_EXPORTER_OTLP_TIMEOUT: '60000',
          OTEL_BSP_SCHEDULE_DELAY: '20',
        }),
      });
      for (let i = 0; i < 3; i++) expect((await getPlan(gateway)).status).toBe(200);
      expect(await gateway.stop()).toBe(0);
    } finally {
      hung.close();
    }
  }, 40_000);

  it('logs once, without its URL, that exports fail when the collector refuses connections; requests are served', async () => {
    const port = await freePort(); // nothing listens there
    const gateway = await startGatewayProcess({
      env: env({
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://bff:${COLLECTOR_SECRET}@127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${COLLECTOR_SECRET}`,
        OTEL_BSP_SCHEDULE_DELAY: '20',
      }),
    });
    try {
      for (let i = 0; i < 3; i++) expect((await getPlan(gateway)).status).toBe(200);
      await waitFor(() => gateway.logs().includes('"trace.export_failed"'), {
        timeoutMs: 20_000,
        what: 'the export failure line',
      });
      for (let i = 0; i < 3; i++) expect((await getPlan(gateway)).status).toBe(200);
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
    expect(gateway.logs().match(/"trace\.export_failed"/g)).toHaveLength(1);
    expect(findSecrets([{ where: 'gateway output', text: gateway.logs() }], [COLLECTOR_SECRET])).toEqual([]);
  }, 40_000);

  it("names the collector's refusal by its HTTP status (a wrong API key is 401, a wrong path 404), never its headers", async () => {
    const refusing = await startOtlpReceiver({ status: 401 });
    const gateway = await startGatewayProcess({
      env: env({
        OTEL_EXPORTER_OTLP_ENDPOINT: refusing.endpoint,
        OTEL_EXPORTER_OTLP_HEADERS: `x-api-key=${COLLECTOR_SECRET}`,
        OTEL_BSP_SCHEDULE_DELAY: '20',
      }),
    });
    try {
      expect((await getPlan(gateway)).status).toBe(200);
      await waitFor(() => gateway.logs().includes('"trace.export_failed"'), {
        what: 'the export failure line',
      });
    } finally {
      expect(await gateway.stop()).toBe(0);
      await refusing.close();
    }
    const failure = gateway
      .logs()
      .split('\n')
      .find((line) => line.includes('"trace.export_failed"')) as string;
    expect(JSON.parse(failure)).toMatchObject({ status: 401 });
    expect(findSecrets([{ where: 'gateway output', text: gateway.logs() }], [COLLECTOR_SECRET])).toEqual([]);
  }, 30_000);

  it('ends every span it starts when requests fail: bad input, upstream timeout, saturation, open circuit, caller gone', async () => {
    const slow = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    const gateway = await startGatewayProcess({
      env: {
        ...env({
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          OTEL_BSP_SCHEDULE_DELAY: '20',
          OTEL_SERVICE_NAME: 'bff-failing',
          UPSTREAM_TIMEOUT_MS: '300',
          UPSTREAM_MAX_SOCKETS: '1',
          UPSTREAM_QUEUE_TIMEOUT_MS: '0',
          CIRCUIT_MINIMUM_CALLS: '2',
          CIRCUIT_FAILURE_RATIO: '0.5',
          CIRCUIT_RESET_MS: '60000',
        }),
        UPSTREAM_BASE_URL: slow.url,
      },
    });
    const get = (requestId: string, plan = PLAN_ID) =>
      fetch(`${gateway.url}/api/subscriptions/plan/${plan}`, {
        headers: { 'x-api-key': API_KEY, 'x-request-id': requestId },
      });
    const statuses: Record<string, number> = {};
    try {
      expect((await get('warm')).status).toBe(200); // a token is held from here on
      const invalid = await fetch(`${gateway.url}/api/validation/document`, {
        method: 'POST',
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json', 'x-request-id': 'invalid' },
        body: '{"country":',
      });
      statuses.invalid = invalid.status;
      slow.setFaults({ latencyMs: 2_000 });
      // One socket: the first call holds it until its timeout, the second finds none free (no queue).
      const timingOut = get('timeout');
      await waitFor(() => slow.receivedRequests().some((r) => r.headers['x-request-id'] === 'timeout'), {
        what: 'the slow call',
      });
      // Another plan: the same one would share the slow call rather than need a socket.
      statuses.saturated = (await get('saturated', OTHER_PLAN)).status;
      statuses.timeout = (await timingOut).status;
      statuses.timeout2 = (await get('timeout-2')).status;
      statuses.open = (await get('circuit-open')).status;
      // The plan circuit is open now; the validation route has its own: its caller hangs up mid-call.
      const leaving = new AbortController();
      const gone = fetch(`${gateway.url}/api/validation/document`, {
        method: 'POST',
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json', 'x-request-id': 'caller-gone' },
        body: JSON.stringify({ country: 'ARG', document: { id: DOCUMENT_ID, type: 'CUIT' } }),
        signal: leaving.signal,
      }).catch(() => 'aborted');
      await waitFor(() => slow.receivedRequests().some((r) => r.headers['x-request-id'] === 'caller-gone'), {
        what: 'the call of the caller who leaves',
      });
      leaving.abort();
      expect(await gone).toBe('aborted');
    } finally {
      expect(await gateway.stop()).toBe(0); // the shutdown flushes every ended span
      await slow.close();
    }
    expect(statuses).toEqual({ invalid: 400, saturated: 503, timeout: 504, timeout2: 504, open: 503 });
    const spans = receiver.spans().filter((s) => s.service === 'bff-failing');
    // Every span's parent was ended (and so exported) too: none was left open under a failure.
    const ids = new Set(spans.map((s) => s.spanId));
    expect(spans.filter((s) => s.parentSpanId && !ids.has(s.parentSpanId)).map((s) => s.name)).toEqual([]);
    const served = spans
      .filter((s) => s.kind === SERVER)
      .map((s) => attribute(s, 'http.response.status_code'));
    expect(served.sort()).toEqual([200, 400, 499, 503, 503, 504, 504]);
    const timedOut = spans.filter(
      (s) => s.name === 'upstream' && attribute(s, 'error.type') === 'upstream_timeout',
    );
    expect(timedOut.length).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it('loads no OpenTelemetry SDK, exports nothing and logs no trace id when no endpoint is set', async () => {
    const modules = moduleReport();
    const exportsBefore = receiver.bodies().length;
    const gateway = await startGatewayProcess({
      env: env({ OTEL_SERVICE_NAME: 'bff-untraced', NODE_OPTIONS: modules.nodeOptions }),
    });
    expect((await getPlan(gateway)).status).toBe(200);
    expect(await gateway.stop()).toBe(0);
    const lines = requestLines(gateway);
    expect(lines.length).toBe(1);
    expect(lines[0]).not.toHaveProperty('traceId');
    const loaded = modules.loaded();
    expect(loaded.some((path) => path.includes('/src/gateway.ts'))).toBe(true);
    expect(
      loaded.filter((path) => path.includes('@opentelemetry/') && !path.includes('@opentelemetry/api')),
    ).toEqual([]);
    // The API alone is there, for prom-client's exemplars: nothing of the gateway's own asked for it.
    const requirers = Object.entries(modules.loadedBy())
      .filter(([path]) => path.includes('@opentelemetry/api/'))
      .map(([, parent]) => parent)
      .filter((parent) => !parent.includes('@opentelemetry/api/'));
    expect(requirers.length).toBeGreaterThan(0);
    expect(requirers.filter((parent) => !parent.includes('/node_modules/prom-client/'))).toEqual([]);
    expect(loaded.some((path) => path.includes('otel-tracing'))).toBe(false);
    expect(receiver.bodies().length).toBe(exportsBefore);
  }, 30_000);
});
