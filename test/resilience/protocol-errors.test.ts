// What Node's HTTP parser refuses before the app runs (bad syntax, headers too large, an unknown Expect, a request that
// does not arrive in time) is answered in the gateway's error envelope, with an X-Request-Id, no-store and the security
// headers, over raw sockets against the real gateway; nothing reaches the upstream, nothing the caller sent is echoed.
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { SECURITY_HEADERS } from '../../src/http/security-headers';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { wireAnswerMismatches } from '../support/contract-proxy';
import { startTestGateway, type TestGateway } from '../support/in-process-gateway';
import { assertNoSecrets } from '../support/leak-scan';

const KEY = `proto-key-${randomBytes(12).toString('hex')}`;
const USERNAME = 'proto-merchant';
const PASSWORD = `proto-Upstream-Pw-${randomBytes(8).toString('hex')}`;
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';

let simulator: RunningSimulator;
let gw: TestGateway;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  gw = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: writeClientsFile([
      { id: 'proto-app', keys: [KEY], scopes: ['plans:read', 'documents:validate'] },
    ]),
    SERVER_REQUEST_TIMEOUT_MS: '1000',
    SERVER_HEADERS_TIMEOUT_MS: '1000',
  });
});

afterAll(async () => {
  await gw?.close();
  await simulator?.close();
});

interface RawAnswer {
  readonly raw: string;
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * Writes `text` on a socket of its own (then `more`, `times` times 10 ms apart, while the socket is open), never ends
 * its side, and reads until the server closes the connection.
 */
function exchange(text: string, more?: { chunk: string; times: number }): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: Number(new URL(gw.url).port) });
    const chunks: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    socket.setTimeout(10_000, () => {
      socket.destroy();
      reject(new Error('no answer within 10 s'));
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      const raw = Buffer.concat(chunks).toString('latin1');
      const end = raw.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = raw.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ raw, status: Number(statusLine.split(' ')[1]), headers, body: raw.slice(end + 4) });
    });
    socket.on('connect', () => {
      socket.write(text);
      if (!more) return;
      let sent = 0;
      timer = setInterval(() => {
        if (sent++ < more.times && !socket.destroyed) socket.write(more.chunk);
      }, 10);
    });
  });
}

function expectEnvelope(answer: RawAnswer, status: number, reason: string, id?: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.body));
  expect(answer.headers['cache-control']).toBe('no-store');
  expect(answer.headers.connection).toBe('close');
  for (const [name, value] of SECURITY_HEADERS) expect(answer.headers[name]).toBe(value);
  const requestId = answer.headers['x-request-id'];
  expect(requestId).toMatch(id === undefined ? /^[0-9a-f-]{36}$/ : new RegExp(`^${id}$`));
  expect(JSON.parse(answer.body)).toEqual({
    status: { code: String(status), description: reason, detail: expect.any(String) },
    requestId,
  });
}

describe('requests the HTTP parser refuses get the error envelope', () => {
  test('a malformed request line: 400 INVALID_REQUEST, nothing forwarded, the caller’s key not echoed', async () => {
    const before = simulator.stats().requests;
    const answer = await exchange(
      `GET /api/subscriptions/plan/${PLAN_ID} HTTP/9.Z\r\nX-API-Key: ${KEY}\r\n\r\n`,
    );
    expectEnvelope(answer, 400, 'INVALID_REQUEST');
    expect(simulator.stats().requests).toBe(before);
    assertNoSecrets([{ where: 'answer', text: answer.raw }], [{ name: 'the API key', value: KEY }]);
  });

  test('a header with a bare CR inside its value: 400 INVALID_REQUEST', async () => {
    const answer = await exchange(
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\rX-Injected: 1\r\n\r\n`,
    );
    expectEnvelope(answer, 400, 'INVALID_REQUEST');
    expect(answer.headers['x-injected']).toBeUndefined();
  });

  test('headers beyond Node’s limit: 431 REQUEST_HEADERS_TOO_LARGE', async () => {
    const answer = await exchange(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expectEnvelope(answer, 431, 'REQUEST_HEADERS_TOO_LARGE');
  });

  test('an Expect other than 100-continue: 417 EXPECTATION_FAILED, nothing forwarded', async () => {
    const before = simulator.stats().requests;
    const answer = await exchange(
      `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nExpect: 200-ok\r\n\r\n`,
    );
    expectEnvelope(answer, 417, 'EXPECTATION_FAILED');
    expect(simulator.stats().requests).toBe(before);
  });

  test('Expect: 100-continue still works: 100 Continue, then the answer', async () => {
    const answer = await exchange(
      `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
    );
    expect(answer.status).toBe(100);
    expect(answer.raw).toMatch(/\r\n\r\nHTTP\/1\.1 200 OK\r\n/);
  });

  test('a request whose headers never end: 408 REQUEST_TIMEOUT after SERVER_REQUEST_TIMEOUT_MS', async () => {
    const answer = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    expectEnvelope(answer, 408, 'REQUEST_TIMEOUT');
  });

  test('a body that never comes: 408 REQUEST_TIMEOUT under the request’s own X-Request-Id, nothing forwarded', async () => {
    const before = simulator.stats().requests;
    const answer = await exchange(
      `POST /api/validation/document HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nX-Request-Id: trickle-1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"country"`,
    );
    expectEnvelope(answer, 408, 'REQUEST_TIMEOUT', 'trickle-1');
    expect(simulator.stats().requests).toBe(before);
  });

  test('a body declared over the limit: 413 PAYLOAD_TOO_LARGE at once, not read off first (nor a 408 when it stalls)', async () => {
    const before = simulator.stats().requests;
    const answer = await exchange(
      `POST /api/validation/document HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nX-Request-Id: huge-1\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n\r\n{`,
    );
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toMatchObject({
      status: { description: 'PAYLOAD_TOO_LARGE' },
      requestId: 'huge-1',
    });
    expect(answer.raw.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(1);
    expect(simulator.stats().requests).toBe(before);
  });

  test('a client that sends the whole oversize body before reading gets its 413, and the request pipelined behind it its own answer', async () => {
    const body = `{"pad":"${'x'.repeat(64 * 1024)}"}`;
    const answer = await exchange(
      `POST /api/validation/document HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    expect(answer.raw.match(/HTTP\/1\.1 \d{3} /g)).toEqual(['HTTP/1.1 413 ', 'HTTP/1.1 200 ']);
  });

  test('an answer given before the body came (401), the body trickling on: the caller reads that answer alone, never a 408 behind it', async () => {
    const answer = await exchange(
      'POST /api/validation/document HTTP/1.1\r\nHost: x\r\nX-Request-Id: early-1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{',
      { chunk: 'a', times: 150 },
    );
    expect(answer.status).toBe(401);
    expect(answer.headers['x-request-id']).toBe('early-1');
    // A status line anywhere (a stray answer follows the body without a line break).
    expect(answer.raw.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(1);
    expect(gw.logs()).toMatch(/"reason":"REQUEST_TIMEOUT"[^\n]*a request already answered/);
  });

  test('garbage pipelined behind a request still with the provider: the caller reads that request’s own answer, never a refusal in its place, and the connection closes after it', async () => {
    simulator.setFaults({ latencyMs: 600 });
    try {
      const before = simulator.stats().requests;
      const answer = await exchange(
        `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nX-Request-Id: slow-read-1\r\n\r\nNOT HTTP AT ALL\r\n\r\n`,
      );
      expect(simulator.stats().requests - before).toBe(1);
      expect(answer.status).toBe(200);
      expect(answer.headers['x-request-id']).toBe('slow-read-1');
      expect(answer.headers.connection).toBe('close');
      const length = Number(answer.headers['content-length']);
      expect(answer.body.slice(length)).toBe('');
      expect(answer.raw).not.toContain('HTTP/1.1 400');
      expect(gw.logs()).toContain('unreadable request behind one still being answered');
    } finally {
      simulator.setFaults({ latencyMs: 0 });
    }
  });

  test('more bytes behind the refusal (the parser raises its error again on each): one log line, no listener piled up', async () => {
    simulator.setFaults({ latencyMs: 400 });
    const message = 'unreadable request behind one still being answered';
    const before = gw.logs().split(message).length;
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const { raw } = await exchange(
        `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n\r\nNOT HTTP\r\n`,
        { chunk: 'MORE GARBAGE\r\n', times: 20 },
      );
      expect(raw.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true);
      expect(gw.logs().split(message).length - before).toBe(1);
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
      simulator.setFaults({ latencyMs: 0 });
    }
  });

  test('each refusal is logged with its request id, status and reason (never the bytes received)', async () => {
    const answer = await exchange(`BREW /pot HTTP/1.1\r\nX-API-Key: ${KEY}\r\nHost: x\r\n\r\n`);
    expect(answer.status).toBe(400);
    const line = gw
      .logs()
      .split('\n')
      .find((entry) => entry.includes(answer.headers['x-request-id'] as string));
    expect(JSON.parse(line ?? '{}')).toMatchObject({
      msg: 'request refused by the HTTP parser',
      status: 400,
      reason: 'INVALID_REQUEST',
      clientIp: '127.0.0.1',
    });
    assertNoSecrets([{ where: 'gateway logs', text: gw.logs() }], [{ name: 'the API key', value: KEY }]);
  });

  test('417 keeps the caller’s well-formed X-Request-Id, as every other answer does', async () => {
    const answer = await exchange(
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: caller-id-123\r\nExpect: 200-ok\r\n\r\n',
    );
    expect(answer.status).toBe(417);
    expect(answer.headers['x-request-id']).toBe('caller-id-123');
    expect(JSON.parse(answer.body).requestId).toBe('caller-id-123');
  });

  test('an HTTP/1.1 request without Host: 400 INVALID_REQUEST in the envelope, nothing forwarded; HTTP/1.0 needs none', async () => {
    const before = simulator.stats().requests;
    const answer = await exchange(
      `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\nX-API-Key: ${KEY}\r\nX-Request-Id: no-host-1\r\n\r\n`,
    );
    expectEnvelope(answer, 400, 'INVALID_REQUEST', 'no-host-1');
    expect(JSON.parse(answer.body).status.detail).toMatch(/Host/);
    expect(simulator.stats().requests).toBe(before);
    const old = await exchange(
      `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.0\r\nX-API-Key: ${KEY}\r\n\r\n`,
    );
    expect(old.status).toBe(200);
  });

  test.each([
    ['two Host headers', 'Host: x\r\nHost: evil.example', /one Host/],
    ['two Host headers in other cases', 'host: x\r\nHOST: x', /one Host/],
    ['a Host with a space', 'Host: a b', /host name/],
    ['a Host with a path', 'Host: x/admin', /host name/],
    ['a Host with userinfo', 'Host: user@x', /host name/],
    ['a Host with a port out of form', 'Host: x:80:80', /host name/],
  ])(
    '%s: 400 INVALID_REQUEST in the envelope, the connection closed, nothing forwarded',
    async (_name, host, detail) => {
      const before = simulator.stats().requests;
      const answer = await exchange(
        `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\n${host}\r\nX-API-Key: ${KEY}\r\nX-Request-Id: bad-host-1\r\n\r\n`,
      );
      expectEnvelope(answer, 400, 'INVALID_REQUEST', 'bad-host-1');
      expect(JSON.parse(answer.body).status.detail).toMatch(detail);
      expect(answer.headers.connection).toBe('close');
      expect(simulator.stats().requests).toBe(before);
    },
  );

  test('100 header fields are served; a 101st gets 431 REQUEST_HEADERS_TOO_LARGE, not a request read without it', async () => {
    const fields = (count: number) =>
      Array.from({ length: count }, (_, i) => `X-Filler-${i}: ${i}\r\n`).join('');
    const plan = (fillers: number, id: string) =>
      `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\n${fields(fillers)}X-API-Key: ${KEY}\r\nX-Request-Id: ${id}\r\nHost: x\r\nConnection: close\r\n\r\n`;
    // 96 fillers + X-API-Key, X-Request-Id, Host, Connection: 100 fields.
    expect((await exchange(plan(96, 'fields-100'))).status).toBe(200);
    const before = simulator.stats().requests;
    // One more: Node would have dropped the last (Connection), and a Host or key after the 100th as well.
    const answer = await exchange(plan(97, 'fields-101'));
    expect(answer.status).toBe(431);
    expect(JSON.parse(answer.body).status).toMatchObject({
      code: '431',
      description: 'REQUEST_HEADERS_TOO_LARGE',
    });
    expect(answer.headers.connection).toBe('close');
    expect(simulator.stats().requests).toBe(before);
  });

  test.each([
    'Host: 127.0.0.1:8080',
    'Host: [::1]:8080',
    'Host: gateway.internal',
    'Host: xn--bcher-kva.example',
    'Host: ',
  ])('a valid Host (%s) is served', async (host) => {
    const answer = await exchange(`GET /healthz HTTP/1.1\r\n${host}\r\nConnection: close\r\n\r\n`);
    expect(answer.status).toBe(200);
  });

  test('requests pipelined behind a 417 or a missing Host never reach the provider (their answers would never be written)', async () => {
    const before = simulator.stats().requests;
    const plan = `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n\r\n`;
    const expectFailed = await exchange(
      `GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n${plan}${plan}`,
    );
    const noHost = await exchange(`GET /healthz HTTP/1.1\r\n\r\n${plan}${plan}`);
    expect([expectFailed.status, noHost.status]).toEqual([417, 400]);
    for (const answer of [expectFailed, noHost])
      expect(answer.raw.match(/^HTTP\/1\.1 \d{3} /gm)).toHaveLength(1);
    expect(simulator.stats().requests).toBe(before);
  });

  test('a refused HEAD gets the head alone: no body, the length it would have', async () => {
    const answers = [
      await exchange(`HEAD /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
      await exchange('HEAD /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\rX-Injected: 1\r\n\r\n'),
    ];
    expect(answers.map((a) => [a.status, a.body])).toEqual([
      [431, ''],
      [400, ''],
    ]);
    for (const answer of answers) expect(Number(answer.headers['content-length'])).toBeGreaterThan(0);
    // A GET whose later chunk happens to begin with "HEAD " keeps its body: only a whole HEAD request line counts.
    const get = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\n', {
      chunk: 'HEAD \u0001\r\n',
      times: 1,
    });
    expect(get.status).toBe(400);
    expect(JSON.parse(get.body).status.description).toBe('INVALID_REQUEST');
  });

  test('the served /openapi.json describes each refusal on the path it came to: status, reason, headers', async () => {
    const document = (await (await fetch(`${gw.url}/openapi.json`)).json()) as Record<string, any>;
    const plan = `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n`;
    const refused = [
      ['get', '/api/subscriptions/plan/{internalId}', `${plan}X-Request-Id: a\rX-Injected: 1\r\n\r\n`, 400],
      ['get', '/api/subscriptions/plan/{internalId}', `${plan}X-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
      ['get', '/api/subscriptions/plan/{internalId}', `${plan}Expect: 200-ok\r\n\r\n`, 417],
      [
        'post',
        '/api/validation/document',
        `POST /api/validation/document HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`,
        408,
      ],
      ['get', '/healthz', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
      ['get', '/readyz', 'GET /readyz HTTP/1.1\r\nHost: x\r\n', 408],
      ['head', '/healthz', `HEAD /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
      ['get', '/healthz', 'GET /healthz HTTP/1.1\r\n\r\n', 400],
      [
        'post',
        '/api/validation/document',
        `POST /api/validation/document HTTP/1.1\r\nX-API-Key: ${KEY}\r\n\r\n`,
        400,
      ],
    ] as const;
    for (const [method, template, request, status] of refused) {
      const answer = await exchange(request);
      expect(answer.status).toBe(status);
      const headers = new Headers(Object.entries(answer.headers));
      expect({
        method,
        template,
        status,
        mismatches: wireAnswerMismatches(document, method, template, { ...answer, headers }),
      }).toEqual({ method, template, status, mismatches: [] });
    }
  });

  test('the gateway keeps serving afterwards', async () => {
    const res = await fetch(`${gw.url}/api/subscriptions/plan/${PLAN_ID}`, { headers: { 'x-api-key': KEY } });
    expect(res.status).toBe(200);
  });
});
