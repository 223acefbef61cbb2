// The contract: every exchange below goes through a validating proxy (express-openapi-validator, test/support/
// contract-proxy.ts) that checks the request and the gateway's answer against the gateway's own served /openapi.json.
// Real gateways, the real simulator as the provider, a real Redis; each gateway-made reason of the catalogue and each
// pass-through status is produced at least once, and a mismatch names the method, path, status and what differs.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import express from 'express';
import { REASON_STATUS } from '../../../src/http/gateway-error';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { SEED_SUBSCRIPTION_ID } from '../../../src/simulator/subscriptions';
import { writeClientsFile } from '../../support/clients-file';
import { type ContractProxy, startContractProxy, type Verdict } from '../../support/contract-proxy';
import { startTestGateway, type TestGateway } from '../../support/in-process-gateway';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { catalogueWithStatement } from '../../support/statement-operation';
import { catalogueWithSubscriptions, SHIPPED_CATALOGUE } from '../../support/subscription-operation';
import { tempDir } from '../../support/temp-dir';

jest.setTimeout(60_000);

const PLAN = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const OTHER_PLAN = '3f2c9a1e-7b4d-4e8a-9c61-0d5e2f7a8b90';
const UNKNOWN_PLAN = '00000000-0000-4000-8000-000000000000';
const FAILING_PLAN = '5e1f0c2a-9d3b-4c7e-8a15-6b2d4f9e0c31';
const KEY = 'contract-key-0123456789abcdef';
const PLANS_ONLY_KEY = 'contract-plans-only-0123456789';
const LIMITED_KEY = 'contract-limited-0123456789ab';
const BUDGET_KEY = 'contract-budget-0123456789abc';
const QUOTA_KEY = 'contract-quota-0123456789abcd';
const USERNAME = 'contract-merchant';
const PASSWORD = 'contract-password';
const VALID_BODY = { country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } };

interface Exchange {
  readonly method?: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  /** JSON-encoded unless a string. */
  readonly body?: unknown;
  /** Whether the document admits the request (the validator must agree). */
  readonly requestValid: boolean;
  readonly status: number;
  /** The gateway's reason (ErrorEnvelope), or 'upstream' for the provider's own answer passed through. */
  readonly reason?: string;
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: any;
  readonly verdict: Verdict;
}

const json = { 'content-type': 'application/json' };
const withKey = (key = KEY) => ({ 'x-api-key': key });
const reasonsSeen = new Set<string>();
const passThroughSeen = new Set<number>();
let sent = 0;

/** Sends one exchange through the proxy; its answer and the validator's verdict. */
async function send(proxy: ContractProxy, exchange: Exchange): Promise<Answer> {
  const id = String(++sent);
  const body =
    exchange.body === undefined
      ? undefined
      : typeof exchange.body === 'string'
        ? exchange.body
        : JSON.stringify(exchange.body);
  const res = await fetch(proxy.url + exchange.path, {
    method: exchange.method ?? 'GET',
    headers: { ...exchange.headers, 'x-contract-exchange': id },
    body,
    redirect: 'manual',
  });
  const text = await res.text();
  const verdict = proxy.verdict(id);
  if (!verdict) throw new Error(`the proxy saw no exchange ${id}`);
  return { status: res.status, headers: res.headers, body: text ? safeJson(text) : undefined, verdict };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** What is wrong with one exchange: the document against the answer, and the answer against the expectation. */
function problemsOf(exchange: Exchange, answer: Answer): string[] {
  const { verdict } = answer;
  const problems = [...verdict.response];
  if (exchange.requestValid && verdict.request.length > 0)
    problems.push(`the document refuses a request the gateway serves: ${verdict.request.join('; ')}`);
  if (!exchange.requestValid && verdict.request.length === 0)
    problems.push('the document admits a request the gateway refuses');
  if (answer.status !== exchange.status) problems.push(`expected status ${exchange.status}`);
  const description = answer.body?.status?.description;
  if (exchange.reason === 'upstream') {
    if (answer.body?.requestId !== undefined) problems.push('expected the provider’s body, got a requestId');
    passThroughSeen.add(answer.status);
  } else if (exchange.reason) {
    if (description !== exchange.reason)
      problems.push(`expected reason ${exchange.reason}, got ${description}`);
    if (answer.body?.requestId !== answer.headers.get('x-request-id'))
      problems.push('requestId differs from X-Request-Id');
    reasonsSeen.add(`${description} ${answer.status}`);
  }
  return problems.map((p) => `${verdict.method} ${verdict.path} -> ${answer.status}: ${p}`);
}

/** Runs exchanges one after the other; every problem of every exchange. */
async function run(proxy: ContractProxy, exchanges: readonly Exchange[]): Promise<string[]> {
  const problems: string[] = [];
  for (const exchange of exchanges) problems.push(...problemsOf(exchange, await send(proxy, exchange)));
  return problems;
}

let redis: RedisServer;
let simulator: RunningSimulator;
let clientsFile: string;
const gateways: TestGateway[] = [];
const proxies: ContractProxy[] = [];

/** A gateway (real, in process) behind a validating proxy that uses the document the gateway serves. */
async function contractFor(
  env: Record<string, string>,
): Promise<{ gateway: TestGateway; proxy: ContractProxy }> {
  const gateway = await startTestGateway(env);
  gateways.push(gateway);
  const document = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as Record<string, any>;
  const proxy = await startContractProxy(gateway.url, document);
  proxies.push(proxy);
  return { gateway, proxy };
}

function upstreamEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: clientsFile,
    REDIS_URL: redis.url,
    ...extra,
  };
}

beforeAll(async () => {
  redis = await startRedisServer();
  simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  clientsFile = writeClientsFile([
    { id: 'contract-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
    { id: 'contract-plans-only', keys: [PLANS_ONLY_KEY], scopes: ['plans:read'] },
    {
      id: 'contract-limited',
      keys: [LIMITED_KEY],
      scopes: ['plans:read'],
      rateLimit: { limit: 1, windowSeconds: 60 },
    },
  ]);
});

afterAll(async () => {
  for (const proxy of proxies) await proxy.close();
  for (const gateway of gateways) await gateway.close();
  await simulator?.close();
  await redis?.stop();
});

afterEach(() => simulator.setFaults({}));

describe('the served /openapi.json describes what the gateway answers', () => {
  let proxy: ContractProxy;
  beforeAll(async () => {
    ({ proxy } = await contractFor(upstreamEnv({ UPSTREAM_TIMEOUT_MS: '1000' })));
  });

  it('for both operations, valid and invalid, HEAD included', async () => {
    const planPath = `/api/subscriptions/plan/${PLAN}`;
    const post = (body: unknown, headers: Record<string, string> = json): Exchange => ({
      method: 'POST',
      path: '/api/validation/document',
      headers: { ...withKey(), ...headers },
      body,
      requestValid: false,
      status: 400,
      reason: 'INVALID_REQUEST',
    });
    const problems = await run(proxy, [
      { path: planPath, headers: withKey(), requestValid: true, status: 200 },
      {
        path: `/api/subscriptions/plan/${PLAN.toUpperCase()}`,
        headers: { ...withKey(), 'x-request-id': 'contract-upper-case-1' },
        requestValid: true,
        status: 200,
      },
      { method: 'HEAD', path: planPath, headers: withKey(), requestValid: true, status: 200 },
      { ...post(VALID_BODY), requestValid: true, status: 200, reason: undefined },
      {
        ...post({ ...VALID_BODY, document: { id: '20-17254359-8', type: 'CUIT' } }),
        requestValid: true,
        status: 200,
        reason: undefined,
      },
      {
        ...post({ ...VALID_BODY, extra: { nested: true } }),
        requestValid: true,
        status: 200,
        reason: undefined,
      },
      post({ ...VALID_BODY, country: 'ARQ' }),
      post({ country: 'ARG', document: { id: '２０１７', type: 'CUIT' } }),
      post({ country: 'ARG' }),
      post('{"country":'),
      {
        ...post('country=ARG', { 'content-type': 'text/plain' }),
        status: 415,
        reason: 'UNSUPPORTED_MEDIA_TYPE',
      },
      {
        ...post({ ...VALID_BODY, document: { id: '1'.repeat(20_000), type: 'CUIT' } }),
        status: 413,
        reason: 'PAYLOAD_TOO_LARGE',
      },
      {
        path: '/api/subscriptions/plan/not-a-uuid',
        headers: withKey(),
        requestValid: false,
        status: 400,
        reason: 'INVALID_REQUEST',
      },
      {
        path: planPath,
        headers: {
          ...withKey(),
          ...Object.fromEntries(Array.from({ length: 120 }, (_, i) => [`x-filler-${i}`, String(i)])),
        },
        requestValid: true,
        status: 431,
        reason: 'REQUEST_HEADERS_TOO_LARGE',
      },
    ]);
    expect(problems).toEqual([]);
  });

  it('for callers refused: unauthenticated, forbidden, rate limited', async () => {
    const planPath = `/api/subscriptions/plan/${PLAN}`;
    const problems = await run(proxy, [
      { path: planPath, requestValid: false, status: 401, reason: 'CLIENT_UNAUTHENTICATED' },
      {
        path: planPath,
        headers: withKey('not-a-registered-key-0000000'),
        requestValid: true,
        status: 401,
        reason: 'CLIENT_UNAUTHENTICATED',
      },
      {
        method: 'POST',
        path: '/api/validation/document',
        headers: { ...withKey(PLANS_ONLY_KEY), ...json },
        body: VALID_BODY,
        requestValid: true,
        status: 403,
        reason: 'CLIENT_FORBIDDEN',
      },
      {
        path: planPath,
        headers: { ...withKey(), 'x-upstream-account': 'default' },
        requestValid: true,
        status: 200,
      },
      {
        path: planPath,
        headers: { ...withKey(), 'x-upstream-account': 'Not An Id!' },
        requestValid: false,
        status: 400,
        reason: 'INVALID_REQUEST',
      },
      {
        path: planPath,
        headers: { ...withKey(), 'x-upstream-account': 'someone-elses' },
        requestValid: true,
        status: 403,
        reason: 'CLIENT_FORBIDDEN',
      },
      { path: planPath, headers: withKey(LIMITED_KEY), requestValid: true, status: 200 },
      {
        path: planPath,
        headers: withKey(LIMITED_KEY),
        requestValid: true,
        status: 429,
        reason: 'RATE_LIMITED',
      },
    ]);
    expect(problems).toEqual([]);
  });

  it('for paths and methods no operation lists', async () => {
    const problems = await run(proxy, [
      { path: '/api/token/', headers: withKey(), requestValid: true, status: 404, reason: 'NOT_FOUND' },
      {
        method: 'DELETE',
        path: `/api/subscriptions/plan/${PLAN}`,
        headers: withKey(),
        requestValid: true,
        status: 405,
        reason: 'METHOD_NOT_ALLOWED',
      },
      {
        method: 'PUT',
        path: '/api/validation/document',
        headers: { ...withKey(), ...json },
        body: VALID_BODY,
        requestValid: true,
        status: 405,
        reason: 'METHOD_NOT_ALLOWED',
      },
    ]);
    expect(problems).toEqual([]);
  });

  it('for the probes: liveness, readiness, metrics and the document itself, GET and HEAD', async () => {
    const problems = await run(
      proxy,
      ['/healthz', '/readyz', '/metrics', '/openapi.json'].flatMap((path) => [
        { path, requestValid: true, status: 200 },
        { method: 'HEAD', path, requestValid: true, status: 200 },
      ]),
    );
    expect(problems).toEqual([]);
  });

  it("for the provider's own answers passed through: 404, 400, and statuses the gateway makes too", async () => {
    const plan = (id: string): Exchange => ({
      path: `/api/subscriptions/plan/${id}`,
      headers: withKey(),
      requestValid: true,
      status: 404,
      reason: 'upstream',
    });
    const problems = await run(proxy, [plan(UNKNOWN_PLAN)]);
    simulator.setFaults({ planNotFoundStatus: 400 });
    problems.push(...(await run(proxy, [{ ...plan(UNKNOWN_PLAN), status: 400 }])));
    simulator.setFaults({ errorStatus: 400, failIds: [VALID_BODY.document.id] });
    problems.push(
      ...(await run(proxy, [
        {
          method: 'POST',
          path: '/api/validation/document',
          headers: { ...withKey(), ...json },
          body: VALID_BODY,
          requestValid: true,
          status: 400,
          reason: 'upstream',
        },
      ])),
    );
    // Statuses the gateway makes too, with a reason of its own (409, 413, 431) or the parser's (408): either body.
    for (const status of [408, 409, 413, 431]) {
      simulator.setFaults({ errorStatus: status, failIds: [PLAN] });
      problems.push(...(await run(proxy, [{ ...plan(PLAN), status }])));
    }
    expect(problems).toEqual([]);
  });

  it('for upstream failures: 5xx and timeouts', async () => {
    simulator.setFaults({ errorStatus: 503, failIds: [PLAN] });
    const problems = await run(proxy, [
      {
        path: `/api/subscriptions/plan/${PLAN}`,
        headers: withKey(),
        requestValid: true,
        status: 502,
        reason: 'UPSTREAM_UNAVAILABLE',
      },
    ]);
    simulator.setFaults({ latencyMs: 1500 });
    problems.push(
      ...(await run(proxy, [
        {
          method: 'POST',
          path: '/api/validation/document',
          headers: { ...withKey(), ...json },
          body: VALID_BODY,
          requestValid: true,
          status: 504,
          reason: 'UPSTREAM_TIMEOUT',
        },
      ])),
    );
    expect(problems).toEqual([]);
  });
});

describe('the document of an operation added to the catalogue at run time', () => {
  it('describes the new operation: its answer filtered, its bad parameters refused, its provider 404 passed', async () => {
    const operationsFile = join(tempDir('bff-contract-catalogue-'), 'operations.json');
    writeFileSync(operationsFile, SHIPPED_CATALOGUE);
    const gateway = await startTestGateway(upstreamEnv({ OPERATIONS_FILE: operationsFile }));
    gateways.push(gateway);
    writeFileSync(operationsFile, catalogueWithSubscriptions());
    await gateway.gateway.reload();
    const document = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as Record<string, any>;
    expect(document.paths['/api/subscriptions/{subscriptionId}'].get.operationId).toBe('subscription');
    const proxy = await startContractProxy(gateway.url, document);
    proxies.push(proxy);
    const path = `/api/subscriptions/${SEED_SUBSCRIPTION_ID}`;
    const problems = await run(proxy, [
      { path, headers: withKey(), requestValid: true, status: 200 },
      { path: `${path}?include=plan`, headers: withKey(), requestValid: true, status: 200 },
      { method: 'HEAD', path, headers: withKey(), requestValid: true, status: 200 },
      {
        path: '/api/subscriptions/sub_unknown1',
        headers: withKey(),
        requestValid: true,
        status: 404,
        reason: 'upstream',
      },
      {
        path: `${path}?include=everything`,
        headers: withKey(),
        requestValid: false,
        status: 400,
        reason: 'INVALID_REQUEST',
      },
      {
        path: '/api/subscriptions/not-a-sub',
        headers: withKey(),
        requestValid: false,
        status: 400,
        reason: 'INVALID_REQUEST',
      },
      {
        method: 'POST',
        path,
        headers: withKey(),
        requestValid: true,
        status: 405,
        reason: 'METHOD_NOT_ALLOWED',
      },
    ]);
    expect(problems).toEqual([]);
    const answer = await send(proxy, { path, headers: withKey(), requestValid: true, status: 200 });
    expect(answer.body.riskScore).toBeUndefined();
    // A success the catalogue does not list, on this strict operation: the status passes, the JSON body as {}.
    simulator.setFaults({ errorRate: 1, errorStatus: 202 });
    const unlisted = {
      path: '/api/subscriptions/sub_unlisted2',
      headers: withKey(),
      requestValid: true,
      status: 202,
    };
    const accepted = await send(proxy, unlisted);
    expect(accepted.body).toEqual({});
    expect(problemsOf(unlisted, accepted)).toEqual([]);
  });
});

describe('the document of a catalogue with a streamed operation', () => {
  it('is valid, publishes the operation without x-gateway, and its streamed answers match it', async () => {
    const operationsFile = join(tempDir('bff-contract-stream-'), 'operations.json');
    writeFileSync(operationsFile, catalogueWithStatement());
    const gateway = await startTestGateway(upstreamEnv({ OPERATIONS_FILE: operationsFile }));
    gateways.push(gateway);
    const document = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as Record<string, any>;
    const published = document.paths['/api/subscriptions/{subscriptionId}/statement'].get;
    expect(published.operationId).toBe('statement');
    expect(JSON.stringify(document)).not.toContain('x-gateway');
    const proxy = await startContractProxy(gateway.url, document);
    proxies.push(proxy);
    const path = `/api/subscriptions/${SEED_SUBSCRIPTION_ID}/statement`;
    const problems = await run(proxy, [
      { path: `${path}?kib=64`, headers: withKey(), requestValid: true, status: 200 },
      { method: 'HEAD', path: `${path}?kib=64`, headers: withKey(), requestValid: true, status: 200 },
      {
        path: '/api/subscriptions/sub_unknown1/statement',
        headers: withKey(),
        requestValid: true,
        status: 404,
        reason: 'upstream',
      },
      {
        path: `${path}?kib=many`,
        headers: withKey(),
        requestValid: false,
        status: 400,
        reason: 'INVALID_REQUEST',
      },
    ]);
    expect(problems).toEqual([]);
  });
});

describe('the document of a gateway under upstream pressure', () => {
  let proxy: ContractProxy;
  beforeAll(async () => {
    ({ proxy } = await contractFor(
      upstreamEnv({
        UPSTREAM_MAX_SOCKETS: '1',
        UPSTREAM_QUEUE_TIMEOUT_MS: '100',
        CIRCUIT_MINIMUM_CALLS: '2',
        CIRCUIT_FAILURE_RATIO: '0.5',
        CIRCUIT_RESET_MS: '60000',
      }),
    ));
  });

  it('describes UPSTREAM_SATURATED and the open circuit, with Retry-After', async () => {
    const plan = (id: string): Exchange => ({
      path: `/api/subscriptions/plan/${id}`,
      headers: withKey(),
      requestValid: true,
      status: 200,
    });
    simulator.setFaults({ latencyMs: 600 });
    const slow = send(proxy, plan(PLAN));
    await new Promise((resolve) => setTimeout(resolve, 150));
    const refused = await send(proxy, plan(OTHER_PLAN));
    const problems = [
      ...problemsOf(plan(PLAN), await slow),
      ...problemsOf({ ...plan(OTHER_PLAN), status: 503, reason: 'UPSTREAM_SATURATED' }, refused),
    ];
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);

    simulator.setFaults({ errorStatus: 500, errorRate: 1 });
    let open: Answer | undefined;
    for (let attempt = 0; attempt < 6 && open?.status !== 503; attempt++) {
      const answer = await send(proxy, plan(PLAN));
      if (answer.status === 503) open = answer;
      else
        problems.push(...problemsOf({ ...plan(PLAN), status: 502, reason: 'UPSTREAM_UNAVAILABLE' }, answer));
    }
    if (!open) throw new Error('the circuit never opened');
    problems.push(...problemsOf({ ...plan(PLAN), status: 503, reason: 'UPSTREAM_UNAVAILABLE' }, open));
    expect(open.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(problems).toEqual([]);
  });
});

describe('the document of a gateway spending provider budgets and client quotas', () => {
  let proxy: ContractProxy;
  const plan = (id: string, key: string, account?: string): Exchange => ({
    path: `/api/subscriptions/plan/${id}`,
    headers: { ...withKey(key), ...(account && { 'x-upstream-account': account }) },
    requestValid: true,
    status: 200,
  });
  beforeAll(async () => {
    const dir = tempDir('bff-contract-accounts-');
    const secret = (name: string, value: string) => {
      writeFileSync(join(dir, name), value);
      return join(dir, name);
    };
    const account = (id: string, extra: object = {}) => ({
      id,
      baseUrl: simulator.url,
      usernameFile: secret(`${id}-user`, USERNAME),
      passwordFile: secret(`${id}-password`, PASSWORD),
      ...extra,
    });
    const accountsFile = join(dir, 'accounts.json');
    writeFileSync(
      accountsFile,
      JSON.stringify({
        // `tight` allows one call every 100 s: its second call finds no room.
        accounts: [account('open'), account('tight', { budget: { requestsPerSecond: 0.01, burst: 1 } })],
      }),
    );
    const { UPSTREAM_USERNAME: _u, UPSTREAM_PASSWORD: _p, UPSTREAM_BASE_URL: _b, ...env } = upstreamEnv();
    const clients = writeClientsFile([
      { id: 'contract-budget', keys: [BUDGET_KEY], scopes: ['plans:read'], accounts: ['tight', 'open'] },
      {
        id: 'contract-quota',
        keys: [QUOTA_KEY],
        scopes: ['plans:read'],
        accounts: ['open'],
        quota: { day: 1, timezone: 'America/Sao_Paulo' },
      },
    ]);
    ({ proxy } = await contractFor({ ...env, UPSTREAM_ACCOUNTS_FILE: accountsFile, CLIENTS_FILE: clients }));
  });

  it('describes QUOTA_EXCEEDED with Retry-After once the day quota is spent', async () => {
    const problems = await run(proxy, [plan(PLAN, QUOTA_KEY)]);
    const refused = await send(proxy, plan(OTHER_PLAN, QUOTA_KEY));
    problems.push(
      ...problemsOf({ ...plan(OTHER_PLAN, QUOTA_KEY), status: 429, reason: 'QUOTA_EXCEEDED' }, refused),
    );
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(problems).toEqual([]);
  });

  it('describes UPSTREAM_BUDGET_EXHAUSTED with Retry-After when the account has no room', async () => {
    const problems: string[] = [];
    let exhausted: Answer | undefined;
    for (let attempt = 0; attempt < 4 && !exhausted; attempt++) {
      const answer = await send(proxy, plan(PLAN, BUDGET_KEY, 'tight'));
      if (answer.status === 429) exhausted = answer;
      else problems.push(...problemsOf(plan(PLAN, BUDGET_KEY, 'tight'), answer));
    }
    if (!exhausted) throw new Error('the budget never refused');
    problems.push(
      ...problemsOf(
        { ...plan(PLAN, BUDGET_KEY, 'tight'), status: 429, reason: 'UPSTREAM_BUDGET_EXHAUSTED' },
        exhausted,
      ),
    );
    expect(exhausted.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(problems).toEqual([]);
  });

  it("passes the provider's 429 through with its Retry-After, then describes UPSTREAM_RATE_LIMITED", async () => {
    simulator.setFaults({ errorStatus: 429, retryAfterSeconds: 7, failIds: [OTHER_PLAN] });
    const limitedExchange = { ...plan(OTHER_PLAN, BUDGET_KEY, 'open'), status: 429, reason: 'upstream' };
    const limited = await send(proxy, limitedExchange);
    const problems = problemsOf(limitedExchange, limited);
    expect(limited.headers.get('retry-after')).toBe('7');
    // The provider paused the account: the gateway answers for it, without calling, until the pause ends.
    const paused = { ...plan(PLAN, BUDGET_KEY, 'open'), status: 503, reason: 'UPSTREAM_RATE_LIMITED' };
    const refused = await send(proxy, paused);
    problems.push(...problemsOf(paused, refused));
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  });
});

describe('the document of a gateway whose provider answers outside the contract (a redirect, its load balancer’s HTML)', () => {
  let proxy: ContractProxy;
  beforeAll(async () => {
    // Keys of its own: the provider's pause after the 429 below is the fleet's, and no other gateway here is in it.
    ({ proxy } = await contractFor(upstreamEnv({ REDIS_KEY_PREFIX: 'contract-html:' })));
  });
  const plan: Exchange = {
    path: `/api/subscriptions/plan/${PLAN}`,
    headers: withKey(),
    requestValid: true,
    status: 502,
    reason: 'UPSTREAM_UNAVAILABLE',
  };

  it('a redirect is followed by nobody and passed to nobody: 502 UPSTREAM_UNAVAILABLE, no Location', async () => {
    simulator.setFaults({ errorStatus: 301, failIds: [PLAN] });
    const moved = await send(proxy, plan);
    expect(moved.headers.get('location')).toBeNull();
    expect(problemsOf(plan, moved)).toEqual([]);
  });

  it('a 4xx that is not JSON is not the provider’s verdict: 502 UPSTREAM_UNAVAILABLE', async () => {
    simulator.setFaults({ errorStatus: 413, errorBody: 'html', failIds: [PLAN] });
    expect(await run(proxy, [plan])).toEqual([]);
  });

  it('an HTML 429 is the provider’s rate limit all the same: 503 UPSTREAM_RATE_LIMITED with its Retry-After', async () => {
    simulator.setFaults({ errorStatus: 429, errorBody: 'html', retryAfterSeconds: 7, failIds: [PLAN] });
    const limitedExchange = { ...plan, status: 503, reason: 'UPSTREAM_RATE_LIMITED' };
    const limited = await send(proxy, limitedExchange);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(problemsOf(limitedExchange, limited)).toEqual([]);
  });
});

describe('the document of a gateway the provider refuses', () => {
  it('describes UPSTREAM_AUTH_FAILED (and its Retry-After while the fleet backs off)', async () => {
    const { proxy } = await contractFor(upstreamEnv({ UPSTREAM_PASSWORD: 'a-wrong-password' }));
    const plan: Exchange = {
      path: `/api/subscriptions/plan/${PLAN}`,
      headers: withKey(),
      requestValid: true,
      status: 502,
      reason: 'UPSTREAM_AUTH_FAILED',
    };
    expect(await run(proxy, [plan, plan])).toEqual([]);
  });

  it('describes UPSTREAM_IP_NOT_WHITELISTED, and the readiness that goes 503', async () => {
    const fenced = await startSimulator({
      port: 0,
      username: USERNAME,
      password: PASSWORD,
      allowedIps: ['203.0.113.7'],
    });
    try {
      const { proxy } = await contractFor(upstreamEnv({ UPSTREAM_BASE_URL: fenced.url }));
      const problems = await run(proxy, [
        {
          path: `/api/subscriptions/plan/${PLAN}`,
          headers: withKey(),
          requestValid: true,
          status: 502,
          reason: 'UPSTREAM_IP_NOT_WHITELISTED',
        },
        { path: '/readyz', requestValid: true, status: 503 },
      ]);
      expect(problems).toEqual([]);
    } finally {
      await fenced.close();
    }
  });
});

describe('the document of local mode: X-Upstream and the /bff/* endpoints of browser sessions', () => {
  let proxy: ContractProxy;
  beforeAll(async () => {
    ({ proxy } = await contractFor({}));
  });

  it('describes every answer, each marked X-Upstream: simulator', async () => {
    const problems = await run(proxy, [
      { path: '/healthz', requestValid: true, status: 200 },
      {
        path: `/api/subscriptions/plan/${PLAN}`,
        headers: { 'x-api-key': 'local-dev-key' },
        requestValid: true,
        status: 200,
      },
      { path: '/bff/login?returnTo=%2Forders', requestValid: true, status: 303 },
      {
        path: '/bff/login?returnTo=//evil.example/x',
        requestValid: false,
        status: 400,
        reason: 'INVALID_REQUEST',
      },
      {
        path: '/bff/callback?state=unknown&code=x',
        requestValid: true,
        status: 400,
        reason: 'INVALID_REQUEST',
      },
      { method: 'HEAD', path: '/bff/callback?state=unknown', requestValid: true, status: 405 },
      {
        path: '/bff/user',
        headers: { 'x-csrf': '1' },
        requestValid: false,
        status: 401,
        reason: 'CLIENT_UNAUTHENTICATED',
      },
      {
        method: 'POST',
        path: '/bff/logout',
        headers: { cookie: '__Host-bff-session=none' },
        requestValid: false,
        status: 403,
        reason: 'CLIENT_FORBIDDEN',
      },
      {
        method: 'POST',
        path: '/bff/backchannel-logout',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'logout_token=not-a-jwt',
        requestValid: true,
        status: 400,
        reason: 'INVALID_REQUEST',
      },
    ]);
    expect(problems).toEqual([]);
  });
});

describe('the document of a gateway taking Idempotency-Key', () => {
  let proxy: ContractProxy;
  let ownRedis: RedisServer;
  const keyed = (key: string, body: unknown = VALID_BODY): Exchange => ({
    method: 'POST',
    path: '/api/validation/document',
    headers: { ...withKey(), ...json, 'idempotency-key': key },
    body,
    requestValid: true,
    status: 200,
  });
  beforeAll(async () => {
    // A Redis of its own: stopped below without touching the other gateways'.
    ownRedis = await startRedisServer();
    ({ proxy } = await contractFor(upstreamEnv({ REDIS_URL: ownRedis.url, UPSTREAM_TIMEOUT_MS: '1000' })));
  });
  afterAll(() => ownRedis?.stop());

  it('describes the header, Idempotent-Replayed, 409, 422, 504 UPSTREAM_OUTCOME_UNKNOWN and 503 IDEMPOTENCY_UNAVAILABLE', async () => {
    const problems = await run(proxy, [
      keyed('contract-first'),
      keyed('contract-first'),
      {
        ...keyed('contract-first', { ...VALID_BODY, country: 'BRA' }),
        status: 422,
        reason: 'IDEMPOTENCY_KEY_REUSED',
      },
      { ...keyed(''), requestValid: false, status: 400, reason: 'INVALID_REQUEST' },
    ]);
    const replay = await send(proxy, keyed('contract-first'));
    expect(replay.headers.get('idempotent-replayed')).toBe('true');

    simulator.setFaults({ latencyMs: 600 });
    const slow = send(proxy, keyed('contract-slow'));
    await new Promise((resolve) => setTimeout(resolve, 150));
    const busy = await send(proxy, keyed('contract-slow'));
    problems.push(
      ...problemsOf(keyed('contract-slow'), await slow),
      ...problemsOf({ ...keyed('contract-slow'), status: 409, reason: 'IDEMPOTENCY_KEY_IN_USE' }, busy),
    );
    expect(busy.headers.get('retry-after')).toMatch(/^\d+$/);

    simulator.setFaults({ latencyMs: 1_500 });
    problems.push(
      ...(await run(proxy, [{ ...keyed('contract-lost'), status: 504, reason: 'UPSTREAM_OUTCOME_UNKNOWN' }])),
    );

    simulator.setFaults({});
    await ownRedis.stop();
    const down = await send(proxy, keyed('contract-down'));
    problems.push(
      ...problemsOf({ ...keyed('contract-down'), status: 503, reason: 'IDEMPOTENCY_UNAVAILABLE' }, down),
    );
    expect(down.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(problems).toEqual([]);
  });
});

describe('the contract test itself', () => {
  it("produced every reason of the gateway's error catalogue and every pass-through status", () => {
    // INTERNAL_ERROR is a gateway bug: no request makes it on purpose (its envelope is the same, checked above).
    const expected = Object.keys(REASON_STATUS).filter((reason) => reason !== 'INTERNAL_ERROR');
    const seen = new Set([...reasonsSeen].map((entry) => entry.split(' ')[0]));
    expect(expected.filter((reason) => !seen.has(reason))).toEqual([]);
    expect([...passThroughSeen].sort()).toEqual([400, 404, 408, 409, 413, 429, 431]);
  });

  it('catches answers the document does not describe (so it can fail)', async () => {
    const liar = express().disable('x-powered-by').disable('etag');
    liar.get('/api/subscriptions/plan/:id', (req, res) => {
      res.setHeader('x-request-id', 'r1');
      res.setHeader('cache-control', 'no-store');
      if (req.params.id === PLAN) res.json({ internalId: PLAN, name: 'no amount' });
      else if (req.params.id === OTHER_PLAN) res.setHeader('x-debug-token', 'abc').json(planLike());
      else if (req.params.id === UNKNOWN_PLAN) res.status(302).json(planLike());
      else if (req.params.id === FAILING_PLAN) res.status(502).json({ message: 'not an envelope' });
      else res.status(400).removeHeader('x-request-id');
      if (!res.headersSent)
        res.json({ status: { code: '400', description: 'INVALID_REQUEST', detail: 'x' } });
    });
    const server = liar.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const document = (await (await fetch(`${gateways[0]?.url}/openapi.json`)).json()) as Record<string, any>;
    const proxy = await startContractProxy(url, document);
    try {
      const verdictOf = async (id: string) =>
        (await send(proxy, { path: `/api/subscriptions/plan/${id}`, requestValid: true, status: 0 })).verdict
          .response;
      expect(await verdictOf(PLAN)).toEqual([
        expect.stringMatching(/^\/response.* must have required property/),
      ]);
      expect(await verdictOf(OTHER_PLAN)).toEqual(['header x-debug-token is sent but not declared']);
      expect(await verdictOf(UNKNOWN_PLAN)).toEqual(expect.arrayContaining(['status 302 is not documented']));
      // A 5xx body is checked too (express-openapi-validator skips every status >= 500 on its own).
      expect(await verdictOf(FAILING_PLAN)).toEqual([
        expect.stringMatching(/^body of 502: .*must have required property/),
      ]);
      expect((await verdictOf('c0ffee00-0000-4000-8000-000000000000')).join()).toMatch(
        /x-request-id is missing/,
      );
    } finally {
      await proxy.close();
      server.close();
    }
  });
});

function planLike() {
  return {
    internalId: OTHER_PLAN,
    name: 'n',
    description: 'd',
    amount: 1,
    country: 'BRA',
    currency: 'BRL',
    accountNumber: '1',
    autoRecurring: { repetitions: 1, type: 'hour', frequency: 1 },
    status: { code: '100', description: 'ACTIVE', detail: 'Plan is active' },
  };
}
