// Hostile requests to an operation declared in the catalogue (not coded): a POST with a path parameter, a query
// parameter and a JSON body. Whatever arrives, the gateway answers 4xx envelopes or forwards exactly the sanitized
// request (the parameter as one encoded segment, only the declared query parameter, only declared body properties);
// never a 5xx, never a polluted prototype. The oracle below restates the rules; it does not import the gateway's.
import { writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import fc from 'fast-check';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { startTestGateway, type TestGateway } from '../support/in-process-gateway';
import { SHIPPED_CATALOGUE } from '../support/subscription-operation';
import { tempDir } from '../support/temp-dir';

const KEY = 'catalogue-fuzz-key-0123456789abcdef';
const RUNS = Number(process.env.FUZZ_RUNS ?? 400);

/** POST /api/notes/{noteId}?limit=N → the simulator's /api/subscriptions/{id} (which records any method's request). */
const NOTE_OPERATION = {
  operationId: 'note',
  'x-gateway': { scope: 'plans:read', upstream: { path: '/api/subscriptions/{noteId}' } },
  parameters: [
    { name: 'noteId', in: 'path', required: true, schema: { type: 'string', minLength: 1, maxLength: 16 } },
    { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 10 } },
  ],
  requestBody: {
    content: {
      'application/json': {
        schema: {
          type: 'object',
          properties: {
            name: { type: 'string', maxLength: 20 },
            tags: {
              type: 'array',
              maxItems: 3,
              items: { type: 'object', properties: { k: { type: 'string' } } },
            },
            meta: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: false },
          },
          required: ['name'],
        },
      },
    },
  },
  responses: { '200': { description: 'ok' } },
};

let simulator: RunningSimulator;
let gw: TestGateway;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(path: string, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(gw.url);
    const headers = { 'x-api-key': KEY, 'content-type': 'application/json' };
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path, headers }, (res) => {
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

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The oracle: the body the provider must receive, or undefined when the body must be refused. */
function expectedBody(value: unknown): unknown {
  if (!isObject(value) || typeof value.name !== 'string' || [...value.name].length > 20) return undefined;
  const out: Record<string, unknown> = { name: value.name };
  if ('tags' in value) {
    const tags = value.tags;
    if (!Array.isArray(tags) || tags.length > 3) return undefined;
    const kept: unknown[] = [];
    for (const tag of tags) {
      if (!isObject(tag)) return undefined;
      if ('k' in tag && typeof tag.k !== 'string') return undefined;
      kept.push('k' in tag ? { k: tag.k } : {});
    }
    out.tags = kept;
  }
  if ('meta' in value) {
    const meta = value.meta;
    if (!isObject(meta) || Object.keys(meta).some((key) => key !== 'a')) return undefined;
    if ('a' in meta && typeof meta.a !== 'string') return undefined;
    out.meta = meta;
  }
  return out;
}

const POLLUTING = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf'];
const key = fc.oneof(
  fc.constantFrom(...POLLUTING, 'name', 'tags', 'k', 'meta', 'a'),
  fc.string({ maxLength: 6 }),
);
const value: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', maxDepth: 3 },
    fc.jsonValue({ maxDepth: 1 }),
    fc.string({ maxLength: 24 }),
    fc.dictionary(key, tie('v'), { maxKeys: 4 }),
    fc.array(tie('v'), { maxLength: 4 }),
  ),
})).v;
const body = fc.oneof(
  value,
  fc.record(
    {
      name: fc.oneof(fc.string({ maxLength: 24 }), value),
      tags: fc.array(fc.dictionary(key, value, { maxKeys: 3 }), { maxLength: 4 }),
      meta: fc.dictionary(fc.constantFrom('a', 'b', '__proto__'), fc.string({ maxLength: 4 }), {
        maxKeys: 2,
      }),
      extra: value,
    },
    { requiredKeys: ['name'] },
  ),
);
/** Path segments as sent on the wire: plain, percent-encoded tricks, dot segments. */
const segment = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9_-]{1,16}$/),
  fc.constantFrom(
    '..',
    '.',
    '%2e%2e',
    '%2E',
    'a%2Fb',
    '%00',
    'a%20b',
    '%E2%80%AE',
    '%ZZ',
    'x'.repeat(17),
    '%25',
  ),
  fc.string({ maxLength: 6 }).map((s) => encodeURIComponent(s)),
);
const query = fc.oneof(
  fc.constant(''),
  fc.constantFrom(
    '?limit=3',
    '?limit=0',
    '?limit=11',
    '?limit=abc',
    '?limit=3&secret=x',
    '?secret=x',
    '?limit=2&limit=9',
  ),
  fc.stringMatching(/^[A-Za-z0-9=&%._~+-]{0,16}$/).map((s) => `?${s}`),
);

beforeAll(async () => {
  simulator = await startSimulator({ port: 0 });
  const file = join(tempDir('bff-catalogue-fuzz-'), 'operations.json');
  const document = JSON.parse(SHIPPED_CATALOGUE);
  document.paths['/api/notes/{noteId}'] = { post: NOTE_OPERATION };
  writeFileSync(file, JSON.stringify(document));
  gw = await startTestGateway({
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'sandbox-merchant',
    UPSTREAM_PASSWORD: 'sandbox-password',
    RATE_LIMIT_DEFAULT_LIMIT: '1000000',
    OPERATIONS_FILE: file,
    CLIENTS_FILE: writeClientsFile([{ id: 'fuzz-app', keys: [KEY], scopes: ['plans:read'] }]),
  });
});

afterAll(async () => {
  await gw?.close();
  await simulator?.close();
});

test('a declared operation: any path, query and body is forwarded sanitized or refused with a 4xx envelope', async () => {
  const counts: Record<string, number> = {};
  await fc.assert(
    fc.asyncProperty(segment, query, body, async (rawSegment, rawQuery, value) => {
      const before = simulator.receivedRequests().length;
      const answer = await send(`/api/notes/${rawSegment}${rawQuery}`, JSON.stringify(value));
      if (answer.status >= 500) throw new Error(`5xx ${answer.status}: ${answer.body.slice(0, 200)}`);
      const received = simulator.receivedRequests().slice(before);
      expect(Object.getPrototypeOf({})).toBe(Object.prototype);
      if (received.length === 0) {
        counts.refused = (counts.refused ?? 0) + 1;
        expect([400, 404]).toContain(answer.status);
        const envelope = JSON.parse(answer.body);
        expect(envelope.status.code).toBe(String(answer.status));
        expect(envelope.requestId).toBe(answer.headers['x-request-id']);
        return;
      }
      counts.forwarded = (counts.forwarded ?? 0) + 1;
      expect(received).toHaveLength(1);
      const [request] = received;
      // Express routes one segment and decodes it; the gateway encodes it again as one segment.
      const id = decodeURIComponent(rawSegment);
      expect(id === '.' || id === '..' || [...id].length > 16 || /[/\\]/.test(id)).toBe(false);
      expect(request?.path).toBe(`/api/subscriptions/${encodeURIComponent(id)}`);
      const limit = new URLSearchParams(rawQuery.slice(1)).get('limit');
      const limitValid = limit !== null && /^\d+$/.test(limit) && Number(limit) >= 1 && Number(limit) <= 10;
      expect(request?.query).toEqual(limitValid ? { limit } : {});
      const expected = expectedBody(value);
      expect(expected).toBeDefined();
      expect(request?.body).toEqual(expected);
    }),
    { numRuns: RUNS },
  );
  // Both sides of the property were exercised.
  expect(counts.forwarded).toBeGreaterThan(10);
  expect(counts.refused).toBeGreaterThan(10);
}, 120_000);
