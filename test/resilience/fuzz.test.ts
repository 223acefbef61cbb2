// Property-based fuzzing of both operations through the real app (in process), a real Redis and the simulator as
// a real HTTP upstream. Every answer is the simulator's 2xx passed through or a gateway 4xx envelope; never a
// 5xx, a crash or an unhandled rejection; invalid input never reaches the upstream; a forwarded body has exactly
// country and document{id,type}. Requests travel over real HTTP (node:http with keep-alive, raw sockets for
// what clients refuse to send).
import { randomBytes } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import fc from 'fast-check';
import { getAlpha3Codes } from 'i18n-iso-countries/index';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { startTestGateway, type TestGateway } from '../support/in-process-gateway';
import { assertNoSecrets, type LabelledText } from '../support/leak-scan';
import { type RedisServer, startRedisServer } from '../support/redis-server';

const KEY = `fuzz-key-${randomBytes(12).toString('hex')}`;
const USERNAME = 'fuzz-merchant';
const PASSWORD = `fuzz-Upstream-Pw-${randomBytes(8).toString('hex')}`;
const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const BODY_LIMIT = 16 * 1024;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The provider's formats, restated here (not imported from the gateway) as the oracle. */
const COUNTRIES = new Set(Object.keys(getAlpha3Codes()));
const ID_CHARACTER = /^[A-Za-z0-9Ñ&./ -]$/;
const ID_END = /^[A-Za-z0-9Ñ&]$/;
const TYPE = /^[A-Z0-9_]{1,32}$/;
/** Headers the upstream may receive (the allow-list, the static header, and transport headers). */
const UPSTREAM_HEADERS = new Set([
  'accept',
  'accept-encoding',
  'authorization',
  'x-request-id',
  'x-version',
  'content-type',
  'content-length',
  'host',
  'connection',
]);
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);

let redis: RedisServer;
let simulator: RunningSimulator;
let gw: TestGateway;
const agent = new Agent({ keepAlive: true, maxSockets: 8 });
const captured: LabelledText[] = [];
const unhandled: unknown[] = [];
const counts: Record<string, number> = {};
const onUnhandled = (reason: unknown) => unhandled.push(reason);

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(method: string, path: string, headers: Record<string, string>, body?: Buffer | string) {
  return new Promise<Answer>((resolve, reject) => {
    const { port } = new URL(gw.url);
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A raw HTTP/1.1 exchange on its own socket, read until the server closes it (Connection: close). */
function rawExchange(text: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(gw.url);
    const socket = connect({ host: '127.0.0.1', port: Number(port) });
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => {
      socket.destroy();
      reject(new Error('raw exchange hung'));
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined); // a reset after the answer is fine; the answer is what is judged
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    // No half-close: Node's server (httpAllowHalfOpen off) drops a request whose client ends its side first.
    socket.on('connect', () => socket.write(text));
  });
}

/** Status line, headers and body of the first final answer of a raw exchange (1xx interim answers skipped). */
function parseRaw(raw: string): Answer & { rest: string } {
  const first = parseOne(raw);
  return first.status >= 100 && first.status < 200 ? parseRaw(first.rest) : first;
}

function parseOne(raw: string): Answer & { rest: string } {
  const match = /^HTTP\/1\.1 (\d{3}) [^\r\n]*\r\n/.exec(raw);
  if (!match) return { status: 0, headers: {}, body: '', rest: raw };
  const end = raw.indexOf('\r\n\r\n');
  const headers: Record<string, string> = {};
  for (const line of raw.slice(match[0].length, end).split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  const body = raw.slice(end + 4, end + 4 + length);
  return { status: Number(match[1]), headers, body, rest: raw.slice(end + 4 + length) };
}

function count(name: string) {
  counts[name] = (counts[name] ?? 0) + 1;
}

function keep(where: string, answer: Answer) {
  if (captured.length > 20_000) return;
  captured.push({ where: `${where} body`, text: answer.body });
  captured.push({ where: `${where} headers`, text: JSON.stringify(answer.headers) });
}

/** The gateway's own error: the gateway's error envelope, its code the HTTP status, its requestId the header's. */
function expectEnvelope(answer: Answer, statuses: readonly number[]) {
  if (!statuses.includes(answer.status)) {
    throw new Error(
      `expected one of ${statuses.join('/')}, got ${answer.status}: ${answer.body.slice(0, 300)}`,
    );
  }
  const body = JSON.parse(answer.body);
  expect(body.status.code).toBe(String(answer.status));
  expect(body.status.description).toMatch(/^[A-Z_]+$/);
  expect(typeof body.status.detail).toBe('string');
  expect(body.requestId).toBe(answer.headers['x-request-id']);
}

function expectNoFiveHundred(answer: Answer) {
  if (answer.status >= 500) throw new Error(`5xx answer ${answer.status}: ${answer.body.slice(0, 300)}`);
}

/** What the gateway should forward for a parsed body, or undefined when the body is invalid. */
function expectedForward(
  value: unknown,
): { country: string; document: { id: string; type: string } } | undefined {
  const isObject = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isObject(value) || !isObject(value.document)) return undefined;
  const { country } = value;
  const { id, type } = value.document;
  const isId = (v: unknown): v is string =>
    typeof v === 'string' &&
    v.length >= 1 &&
    v.length <= 32 &&
    [...v].every((c) => ID_CHARACTER.test(c)) &&
    ID_END.test(v[0] as string) &&
    ID_END.test(v.at(-1) as string);
  if (typeof country !== 'string' || !COUNTRIES.has(country)) return undefined;
  if (!isId(id) || typeof type !== 'string' || !TYPE.test(type)) return undefined;
  return { country, document: { id, type } };
}

// --- generators -------------------------------------------------------------------------------------------------

const POLLUTING_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'];
const anyKey = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(...POLLUTING_KEYS, 'country', 'document', 'id', 'type') },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
);
/** Strings with what breaks parsers, logs and headers: controls, separators, surrogates, RTL, emoji, NUL. */
const nastyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.string({
    unit: fc.constantFrom(
      '\u0000',
      '\n',
      '\r',
      '\t',
      '\u007f',
      '\u0085',
      '\u2028',
      '\u202e',
      '\ud800',
      'é',
      '😀',
      'A',
      '1',
      '-',
      '.',
    ),
    maxLength: 20,
  }),
  fc.constantFrom(
    '20-17254359-7',
    '529.982.247-25',
    '12345678',
    'CUIT',
    'CPF',
    'DNI',
    ' ',
    '$' + '{jndi:ldap://x}',
    "' OR 1=1 --",
  ),
);
const pollutedJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    fc.jsonValue({ maxDepth: 1 }),
    nastyString,
    fc.dictionary(anyKey, tie('value'), { maxKeys: 4 }),
    fc.array(tie('value'), { maxLength: 3 }),
  ),
})).value;
const country = fc.oneof(
  fc.constantFrom(
    'ARG',
    'BRA',
    'URY',
    'CHL',
    'ZZZ',
    'ARQ',
    'XXX',
    'arg',
    'AR',
    'ARGE',
    'ÁRG',
    ' ARG',
    'AR\u0000',
  ),
  fc.constantFrom(...COUNTRIES),
  fc.stringMatching(/^[A-Z]{3}$/),
  pollutedJson,
);
/** Characters that look like (or hide between) the ones a document id or type may hold. */
const documentLookalike = fc.constantFrom(
  '\uff10', // full-width 0
  '\uff11',
  '\u0660', // Arabic-Indic 0
  '\u06f1', // extended Arabic-Indic 1
  '\u0966', // Devanagari 0
  '\u{1d7ce}', // mathematical bold 0
  '\u2010', // hyphen
  '\u2212', // minus sign
  '\uff0d', // full-width hyphen-minus
  '\u2024', // one dot leader
  '\u2215', // division slash
  '\u00a0', // no-break space
  '\u3000', // ideographic space
  '\u200b', // zero-width space
  '\u200d', // zero-width joiner
  '\ufeff', // zero-width no-break space
  '\u202e', // right-to-left override
  '\u2066', // left-to-right isolate
  '\u061c', // Arabic letter mark
  '\u0410', // Cyrillic A
  '\u0421', // Cyrillic ES
  '\u0399', // Greek IOTA
  '\u0303', // combining tilde
  'ñ',
  'É',
  '_',
  ',',
);
/** Ids the format allows: letters, digits, Ñ and &, separators inside. */
const wellFormedId = fc.stringMatching(/^[A-Za-z0-9Ñ&]([A-Za-z0-9Ñ&./ -]{0,30}[A-Za-z0-9Ñ&])?$/);
const wellFormedType = fc.stringMatching(/^[A-Z0-9_]{1,32}$/);
/** A well-formed value with one look-alike inserted or swapped in: must be refused, naming its field. */
const withLookalike = (base: fc.Arbitrary<string>) =>
  fc.tuple(base, fc.nat(), documentLookalike, fc.boolean()).map(([value, at, l, replace]) => {
    const i = at % (value.length + 1);
    return value.slice(0, i) + l + value.slice(replace ? i + 1 : i);
  });
const docText = fc.oneof(
  nastyString,
  pollutedJson,
  wellFormedId,
  wellFormedType,
  withLookalike(wellFormedId),
  withLookalike(wellFormedType),
  fc.integer({ min: 30, max: 70 }).map((n) => '9'.repeat(n)),
);
const withExtras = <T extends object>(base: fc.Arbitrary<T>) =>
  fc
    .tuple(base, fc.dictionary(anyKey, pollutedJson, { maxKeys: 3 }))
    .map(([value, extra]) => Object.assign(Object.create(null) as object, extra, value));
const documentValue = fc.oneof(
  { weight: 3, arbitrary: withExtras(fc.record({ id: docText, type: docText }, { requiredKeys: [] })) },
  { weight: 1, arbitrary: pollutedJson },
);
const structuredBody = withExtras(fc.record({ country, document: documentValue }, { requiredKeys: [] }));
/** Nesting deeper than any sane schema (within and past the body limit). */
const deepBody = fc
  .tuple(fc.integer({ min: 1, max: 9_000 }), fc.constantFrom('[', '{"a":', '{"__proto__":'))
  .map(([depth, open]) => {
    const close = open === '[' ? ']' : '}';
    const inner = `${open.repeat(depth)}1${close.repeat(depth)}`;
    return `{"country":"ARG","document":{"id":"20-17254359-7","type":"CUIT","deep":${inner}}}`;
  });
/** Strings around the 16 KiB body limit, in the id or in an unknown field. */
const hugeBody = fc
  .tuple(fc.integer({ min: 15_800, max: 17_000 }), fc.boolean())
  .map(([n, inId]) =>
    JSON.stringify(
      inId
        ? { country: 'ARG', document: { id: 'x'.repeat(n), type: 'CUIT' } }
        : { country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' }, padding: 'é'.repeat(n / 2) },
    ),
  );
/** Valid bodies under unknown and polluting fields at every depth: must be forwarded with the three fields only. */
const validWithExtras = withExtras(
  fc.record({
    country: fc.oneof(fc.constantFrom(...COUNTRIES), fc.stringMatching(/^[A-Z]{3}$/)),
    document: withExtras(
      fc.record({
        id: fc.oneof(
          fc.constantFrom('20-17254359-7', '529.982.247-25', '11.222.333/0001-81', 'MUÑO800101AB1'),
          wellFormedId,
          fc.string({ minLength: 1, maxLength: 40 }),
        ),
        type: fc.oneof(
          fc.constantFrom('CUIT', 'CPF', 'CNPJ', 'RUT', 'DNI'),
          wellFormedType,
          fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }),
        ),
      }),
    ),
  }),
);
const bodyText = fc.oneof(
  { weight: 3, arbitrary: validWithExtras.map((v) => JSON.stringify(v)) },
  { weight: 6, arbitrary: structuredBody.map((v) => JSON.stringify(v)) },
  { weight: 2, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.anything({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'undefined') },
  { weight: 1, arbitrary: deepBody },
  { weight: 1, arbitrary: hugeBody },
  { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
);
const contentType = fc.oneof(
  { weight: 8, arbitrary: fc.constant('application/json') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      'multipart/form-data; boundary=x',
      'application/json;;',
      'application/jsonx',
      '',
    ),
  },
);

// Plan ids: valid UUIDs in any case, and the tricks: encoded separators and dot segments, NUL, double encoding,
// broken escapes, unicode lookalikes, very long ids.
const uuid = fc.uuid().chain((id) => fc.constantFrom(id, id.toUpperCase(), id.toLowerCase()));
const trick = fc.constantFrom(
  '%2F',
  '%2f',
  '%2e%2e',
  '..',
  '.',
  '%00',
  '%252F',
  '%25',
  '%ZZ',
  '%E0%A4%A',
  '%C0%AF',
  '%u002F',
  '%5C',
  '\\',
  '%20',
  '+',
  ';',
  '%3B',
  '%3F',
  '%23',
  '%0d%0a',
  '%E2%80%90',
  '%EF%BC%8D',
  '%D0%B0',
  '/',
  '//',
  './',
);
const lookalike = fc.constantFrom(
  '\u2010',
  '\u2011',
  '\u2212',
  '\uff0d',
  '\u0430',
  '\u0435',
  '\uff10',
  '\u0660',
);
const planSegment = fc.oneof(
  { weight: 3, arbitrary: uuid },
  {
    weight: 4,
    arbitrary: fc
      .tuple(uuid, fc.nat({ max: 36 }), trick, fc.boolean())
      .map(([id, at, t, replace]) => id.slice(0, at) + t + id.slice(replace ? at + 1 : at)),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(uuid, fc.nat({ max: 35 }), lookalike)
      .map(([id, at, l]) => encodeURIComponent(id.slice(0, at) + l + id.slice(at + 1))),
  },
  { weight: 2, arbitrary: fc.string({ maxLength: 60 }).map(encodeURIComponent) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).map(encodeURIComponent) },
  { weight: 1, arbitrary: fc.integer({ min: 100, max: 8_000 }).map((n) => 'a'.repeat(n)) },
  { weight: 1, arbitrary: uuid.map((id) => `${id}%00`) },
  { weight: 1, arbitrary: uuid.map((id) => encodeURIComponent(encodeURIComponent(id))) },
  { weight: 1, arbitrary: fc.array(trick, { minLength: 1, maxLength: 6 }).map((t) => t.join('')) },
);

// Headers: many of them, odd names and values, spoofing and smuggling attempts.
const headerName = fc.oneof(
  fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
  fc.constantFrom(
    'x-forwarded-for',
    'x-forwarded-host',
    'x-real-ip',
    'forwarded',
    'cookie',
    'authorization',
    'x-request-id',
    'x-api-key',
    'host',
    'content-type',
    'content-length',
    'transfer-encoding',
    'expect',
    'x-http-method-override',
    'proxy-authorization',
    'x-version',
    'origin',
    'accept-encoding',
    'upgrade',
    'connection',
  ),
);
const headerValue = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 80 }),
  fc.string({ unit: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 20 }),
  fc.constantFrom(
    'chunked',
    'gzip, chunked',
    '0',
    '-1',
    '99999999999',
    '127.0.0.1',
    'close',
    'websocket',
    '100-continue',
    'Bearer eyJfake',
    'application/xml',
  ),
);
const headerList = fc.array(fc.tuple(headerName, headerValue), { maxLength: 200 });

// --- setup ------------------------------------------------------------------------------------------------------

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  process.on('uncaughtException', onUnhandled);
  redis = await startRedisServer();
  simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  gw = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    UPSTREAM_STATIC_HEADERS: 'x-version: LPV3',
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: `fuzz-${randomBytes(4).toString('hex')}:`,
    TOKEN_ENCRYPTION_KEY: ENCRYPTION_KEY,
    RATE_LIMIT_DEFAULT_LIMIT: '1000000',
    CLIENTS_FILE: writeClientsFile([
      { id: 'fuzz-app', keys: [KEY], scopes: ['documents:validate', 'plans:read'] },
    ]),
  });
  // Warm the upstream token: from here on, every upstream request counted is a forwarded operation.
  expect((await send('GET', `/api/subscriptions/plan/${PLAN_ID}`, { 'x-api-key': KEY })).status).toBe(200);
});

afterAll(async () => {
  agent.destroy();
  await gw?.close();
  await simulator?.close();
  await redis?.stop();
  process.off('unhandledRejection', onUnhandled);
  process.off('uncaughtException', onUnhandled);
  console.log(
    `fuzz (seed ${SEED}): ${Object.entries(counts)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
});

const run = <T>(numRuns: number, examples: T[] = []) => ({
  numRuns,
  seed: SEED,
  endOnFailure: true,
  examples,
});

describe('fuzzing the two operations', () => {
  test('POST /api/validation/document: any body is forwarded sanitized or refused with a 4xx envelope', async () => {
    await fc.assert(
      fc.asyncProperty(bodyText, contentType, async (text, type) => {
        const before = simulator.stats().requests;
        const bytes = Buffer.from(text);
        const answer = await send(
          'POST',
          '/api/validation/document',
          { 'x-api-key': KEY, 'content-type': type },
          bytes,
        );
        keep('fuzzed validation answer', answer);
        expectNoFiveHundred(answer);
        const forwarded = simulator.stats().requests - before;

        let parsed: unknown;
        let parses = true;
        try {
          parsed = JSON.parse(text);
        } catch {
          parses = false;
        }
        const json = type === 'application/json' || type === 'application/json; charset=utf-8';
        const valid = bytes.length <= BODY_LIMIT && parses ? expectedForward(parsed) : undefined;
        // Odd media types ('application/json;;') may be read as JSON or refused with 415; either way only a valid
        // body may travel. Plain JSON is exact: valid bodies are forwarded, all others refused.
        const expected = json || forwarded > 0 ? valid : undefined;
        if (expected) {
          count('bodies.forwarded');
          expect(answer.status).toBe(200);
          expect(JSON.parse(answer.body).code).toMatch(/^(200|300)$/);
          expect(forwarded).toBe(1);
          const received = simulator.receivedRequests().at(-1)?.body as Record<string, unknown>;
          expect(received).toEqual(expected);
          // In the caller's order: the catalogue's validation strips the body in place (JSON objects have no order).
          expect(Object.keys(received).sort()).toEqual(['country', 'document']);
          expect(Object.keys(received.document as object).sort()).toEqual(['id', 'type']);
        } else {
          count('bodies.refused');
          expect(forwarded).toBe(0);
          const statuses = !json ? [400, 413, 415] : bytes.length > BODY_LIMIT ? [413] : [400];
          expectEnvelope(answer, statuses);
        }
        expect(Object.getPrototypeOf({})).toBe(Object.prototype);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      }),
      run(3000),
    );
  }, 60_000);

  test('look-alikes in a well-formed document (full-width digits, bidi, zero-width, homoglyphs): 400 naming the field', async () => {
    const lookalikeBody = fc.oneof(
      withLookalike(wellFormedId).map((id) => ({ field: 'document.id', id, type: 'CUIT' })),
      withLookalike(wellFormedType).map((type) => ({ field: 'document.type', id: '20-17254359-7', type })),
    );
    await fc.assert(
      fc.asyncProperty(lookalikeBody, fc.constantFrom(...COUNTRIES), async ({ field, id, type }, country) => {
        const body = { country, document: { id, type } };
        // Inserting a separator between letters can still be well formed (`A.B`): only real refusals count.
        if (expectedForward(body)) return;
        const before = simulator.stats().requests;
        const answer = await send(
          'POST',
          '/api/validation/document',
          { 'x-api-key': KEY, 'content-type': 'application/json' },
          Buffer.from(JSON.stringify(body)),
        );
        count('lookalikes.refused');
        expectEnvelope(answer, [400]);
        expect(JSON.parse(answer.body).errors.map((e: { path: string }) => e.path)).toEqual([field]);
        expect(simulator.stats().requests).toBe(before);
      }),
      run(600),
    );
  }, 60_000);

  test('GET /api/subscriptions/plan/:id: only a UUID reaches the upstream; tricks get 400/404 envelopes', async () => {
    await fc.assert(
      fc.asyncProperty(planSegment, async (segment) => {
        const before = simulator.stats().requests;
        const answer = await send('GET', `/api/subscriptions/plan/${segment}`, { 'x-api-key': KEY });
        keep('fuzzed plan answer', answer);
        expectNoFiveHundred(answer);
        const forwarded = simulator.stats().requests - before;
        // Express routes are not strict: one trailing slash (raw, not encoded) still names the plan.
        const raw = segment.replace(/\/$/, '');
        let id: string | undefined;
        try {
          id = decodeURIComponent(raw);
        } catch {
          id = undefined;
        }
        const valid = !raw.includes('/') && id !== undefined && UUID.test(id);
        if (valid) {
          count('ids.forwarded');
          expect([200, 404]).toContain(answer.status);
          expect(forwarded).toBe(1);
          expect(simulator.receivedRequests().at(-1)?.path).toBe(
            `/api/subscriptions/plan/${(id as string).toLowerCase()}`,
          );
        } else {
          count('ids.refused');
          expect(forwarded).toBe(0);
          expectEnvelope(answer, [400, 404]);
        }
      }),
      // Broken escapes made the router throw a URIError, once answered 500 INTERNAL_ERROR.
      run(2000, [['%ZZ'], ['%E0%A4%A'], ['%u002F%ZZ'], [`${PLAN_ID.slice(0, 35)}%`]]),
    );
  }, 60_000);

  test('many, odd and spoofed headers: never a 5xx, the upstream gets only the allow-list', async () => {
    const body = JSON.stringify({ country: 'ARG', document: { id: '20-17254359-7', type: 'CUIT' } });
    await fc.assert(
      fc.asyncProperty(headerList, fc.boolean(), async (extra, extraFirst) => {
        const before = simulator.stats().requests;
        const fixed = [
          'POST /api/validation/document HTTP/1.1',
          'Host: 127.0.0.1',
          'Content-Type: application/json',
          `X-API-Key: ${KEY}`,
        ];
        const fuzzed = extra.map(([name, value]) => `${name}: ${value}`);
        const lines = extraFirst ? [fixed[0] as string, ...fuzzed, ...fixed.slice(1)] : [...fixed, ...fuzzed];
        const raw = Buffer.from(
          `${lines.join('\r\n')}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
          'latin1',
        );
        const text = await rawExchange(raw);
        const answer = parseRaw(text);
        keep('fuzzed headers answer', answer);
        // Node's parser may refuse the request itself (400/413/431) or answer a smuggled second request.
        expect(answer.status).toBeGreaterThanOrEqual(200);
        expectNoFiveHundred(answer);
        expect(text).not.toMatch(/^HTTP\/1\.1 5\d\d/m);
        const forwarded = simulator.stats().requests - before;
        if (answer.status === 200) {
          count('headers.forwarded');
          expect(forwarded).toBe(1);
          const received = simulator.receivedRequests().at(-1)?.headers ?? {};
          for (const name of Object.keys(received)) expect(UPSTREAM_HEADERS).toContain(name);
          expect(String(received.authorization)).toMatch(/^Bearer eyJ/);
          // The gateway's own, never a fuzzed caller's: the answers it reads come uncompressed.
          expect(received['accept-encoding']).toBe('identity');
        } else {
          count('headers.refused');
          expect(forwarded).toBe(0);
          // 429: a fuzzed second X-API-Key spoils the key, and after AUTH_FAILURE_LIMIT such failures the address
          // is blocked for failed authentications. What Node's parser refuses before the app runs (bad syntax,
          // header overflow, an unknown Expect) is answered in the envelope too (src/http/protocol-errors.ts).
          expectEnvelope(answer, [400, 401, 403, 404, 405, 413, 415, 417, 429, 431]);
        }
      }),
      run(800),
    );
  }, 60_000);

  test('CR/LF header injection: clients refuse it, the server refuses it raw, nothing is reflected', async () => {
    // The platform clients refuse to send a header value with CR or LF.
    expect(() =>
      httpRequest({ host: '127.0.0.1', port: 1, headers: { 'x-request-id': 'a\r\nx-injected: 1' } }),
    ).toThrow(/Invalid character/);
    await expect(
      fetch(`${gw.url}/healthz`, { headers: { 'x-request-id': 'a\r\nx-injected: 1' } }),
    ).rejects.toThrow();

    const injection = fc.tuple(
      fc.constantFrom('x-request-id', 'x-api-key', 'x-custom', 'content-type'),
      fc.string({ maxLength: 10 }),
      fc.constantFrom('\r\n', '\n', '\r', '\r\n ', '\u0000', '\r\r\n', '\n\r'),
      fc.constantFrom(
        'X-Injected: 1',
        'Set-Cookie: injected=1',
        'Location: http://evil',
        '',
        'HTTP/1.1 200 OK',
      ),
    );
    await fc.assert(
      fc.asyncProperty(injection, async ([name, prefix, breaker, payload]) => {
        const before = simulator.stats().requests;
        const text = await rawExchange(
          `GET /api/subscriptions/plan/${PLAN_ID} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${KEY}\r\n` +
            `${name}: ${prefix}${breaker}${payload}\r\nConnection: close\r\n\r\n`,
        );
        const answer = parseRaw(text);
        keep('header injection answer', answer);
        count('injection.cases');
        expectNoFiveHundred(answer);
        expect(answer.status).toBeGreaterThanOrEqual(200);
        // Nothing the caller wrote comes back as a header of the answer.
        expect(answer.headers['x-injected']).toBeUndefined();
        expect(answer.headers['set-cookie']).toBeUndefined();
        expect(answer.headers.location).toBeUndefined();
        const requestIdEcho = answer.headers['x-request-id'];
        if (requestIdEcho) expect(requestIdEcho).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
        if (simulator.stats().requests > before) {
          const received = simulator.receivedRequests().at(-1)?.headers ?? {};
          expect(received['x-injected']).toBeUndefined();
          expect(received.cookie).toBeUndefined();
        }
      }),
      run(200),
    );
  }, 60_000);

  test('no unhandled rejection, no crash, and no secret in logs, answers or /metrics', async () => {
    // Still serving.
    const health = await send('GET', `/api/subscriptions/plan/${PLAN_ID}`, { 'x-api-key': KEY });
    expect(health.status).toBe(200);
    expect(unhandled).toEqual([]);
    const internalErrors = gw
      .logs()
      .split('\n')
      .filter((line) => line.includes('unhandled error'));
    expect(internalErrors.map((line) => line.slice(0, 300))).toEqual([]);
    const metrics = await send('GET', '/metrics', {});
    expect(metrics.status).toBe(200);
    expect(metrics.body).not.toMatch(/status="5\d\d"/);
    assertNoSecrets(
      [...captured, { where: 'gateway logs', text: gw.logs() }, { where: '/metrics', text: metrics.body }],
      [
        { name: 'the upstream password', value: PASSWORD },
        { name: 'the API key', value: KEY },
        { name: 'TOKEN_ENCRYPTION_KEY', value: ENCRYPTION_KEY },
      ],
    );
  });
});
