import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadCatalogue } from '../../../src/catalogue';
import { REASON_STATUS } from '../../../src/http/gateway-error';
import { PROTOCOL_REFUSALS } from '../../../src/http/protocol-errors';
import { ALPHA3_COUNTRY_CODES } from '../../../src/routes/country-codes';
import { buildOpenApiDocument } from '../../../src/routes/openapi';
import { safeReturnTo } from '../../../src/sessions/return-to';
import { tempDir } from '../../support/temp-dir';

describe('the OpenAPI document', () => {
  const catalogue = loadCatalogue(join(__dirname, '../../../config/operations.json'), {
    maxTimeoutMs: 10_000,
  });
  const document = buildOpenApiDocument('test', catalogue) as Record<string, any>;
  const withSessions = buildOpenApiDocument('test', catalogue, { sessions: true }) as Record<string, any>;

  it.each([
    ['without', document],
    ['with', withSessions],
  ])('is a valid OpenAPI 3.1 document %s browser sessions', (_name, document) => {
    // The validator is an ES module that Jest's CommonJS runtime cannot load: run it in a plain Node process.
    const script = `
      import { Validator } from '@seriousme/openapi-schema-validator';
      const input = await new Promise((r) => { let s = ''; process.stdin.on('data', (c) => (s += c)); process.stdin.on('end', () => r(s)); });
      const validator = new Validator();
      const result = await validator.validate(JSON.parse(input));
      process.stdout.write(JSON.stringify({ valid: result.valid, errors: result.errors ?? [], version: validator.version }));`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      input: JSON.stringify(document),
      cwd: process.cwd(),
    });
    const result = JSON.parse(output.toString());
    expect(result.errors).toEqual([]);
    expect(result.valid).toBe(true);
    expect(result.version).toBe('3.1');
  });

  it('is caught by the validator when broken (the check above can fail)', () => {
    const script = `
      import { Validator } from '@seriousme/openapi-schema-validator';
      const result = await new Validator().validate({ openapi: '3.1.0', info: {}, paths: { '/x': { get: { responses: 'no' } } } });
      process.stdout.write(String(result.valid));`;
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', script]).toString()).toBe('false');
  });

  it('lists every route of the gateway', () => {
    expect(Object.keys(document.paths).sort()).toEqual(
      [
        '/api/subscriptions/plan/{internalId}',
        '/api/validation/document',
        '/healthz',
        '/metrics',
        '/openapi.json',
        '/readyz',
      ].sort(),
    );
  });

  it('lists /bff/* and the session cookie scheme only when browser sessions are on', () => {
    const bff = ['/bff/backchannel-logout', '/bff/callback', '/bff/login', '/bff/logout', '/bff/user'];
    expect(
      Object.keys(withSessions.paths)
        .filter((path) => path.startsWith('/bff/'))
        .sort(),
    ).toEqual(bff);
    expect(Object.keys(document.paths).some((path) => path.startsWith('/bff/'))).toBe(false);
    expect(withSessions.components.securitySchemes.session).toMatchObject({
      type: 'apiKey',
      in: 'cookie',
      name: '__Host-bff-session',
    });
    expect(document.components.securitySchemes.session).toBeUndefined();
    expect(withSessions.paths['/bff/user'].get.parameters[0]).toMatchObject({
      name: 'X-CSRF',
      required: true,
    });
    expect(JSON.stringify(withSessions.paths['/bff/user'])).not.toMatch(
      /refresh_token|id_token|access_token/,
    );
  });

  it('documents the request schema from the catalogue that validates requests, without x-gateway', () => {
    const schema = document.components.schemas.DocumentValidationRequest;
    expect(schema).toEqual(
      (catalogue.published.components.schemas as Record<string, unknown>).DocumentValidationRequest,
    );
    expect(schema.required).toEqual(['country', 'document']);
    // The country list is data in the document: the maintained list it was written from has not moved since.
    expect(schema.properties.country.enum).toEqual(ALPHA3_COUNTRY_CODES);
    expect(schema.properties.country.enum).not.toContain('ARQ');
    expect(schema.properties.document.properties.type.pattern).toBe('^[A-Z0-9_]+$');
    expect(JSON.stringify(document)).not.toContain('x-gateway');
    const plan = document.paths['/api/subscriptions/plan/{internalId}'].get;
    expect(plan.parameters[0].schema.pattern).toMatch(/0-9a-fA-F/);
  });

  it('documents the error envelope and the reasons on each operation', () => {
    const envelope = document.components.schemas.ErrorEnvelope;
    expect(envelope.required).toEqual(expect.arrayContaining(['status', 'requestId']));
    const post = document.paths['/api/validation/document'].post.responses;
    expect(Object.keys(post)).toEqual(
      expect.arrayContaining(['200', '400', '401', '403', '413', '415', '429', '502', '503', '504']),
    );
    expect(post['400'].description).toContain('INVALID_REQUEST');
    // 400 is the gateway's INVALID_REQUEST or the provider's own 400, passed through: either body.
    expect(post['400'].content['application/json'].schema.anyOf).toEqual([
      {
        allOf: [
          { $ref: '#/components/schemas/ErrorEnvelope' },
          expect.objectContaining({
            properties: {
              status: {
                type: 'object',
                properties: { description: { type: 'string', enum: ['INVALID_REQUEST'] } },
              },
            },
          }),
        ],
      },
      { $ref: '#/components/schemas/UpstreamError' },
    ]);
    // The provider's 413 passes through as well (every 4xx but 401 and 403): either body, as at 400.
    expect(post['413'].content['application/json'].schema.anyOf[1]).toEqual({
      $ref: '#/components/schemas/UpstreamError',
    });
    // 401 and 403 only the gateway makes (the provider's become 502s).
    for (const status of ['401', '403'])
      expect(post[status].content['application/json'].schema.allOf[0].$ref).toBe(
        '#/components/schemas/ErrorEnvelope',
      );
  });

  it('documents every reason of the error catalogue somewhere', () => {
    const text = JSON.stringify(withSessions);
    expect(Object.keys(REASON_STATUS).filter((reason) => !text.includes(`"${reason}"`))).toEqual([]);
  });

  it('lists the refusals of Node’s HTTP parser (400, 408, 413, 417, 431) on every path and method, HEAD included', () => {
    const reasonsAt = (response: any): string =>
      JSON.stringify(response?.content ?? {})
        .match(/"enum":\[[^\]]*\]/g)
        ?.join() ?? '';
    const missing: string[] = [];
    for (const [path, item] of Object.entries<Record<string, any>>(withSessions.paths))
      for (const [method, operation] of Object.entries<Record<string, any>>(item))
        for (const refusal of PROTOCOL_REFUSALS) {
          const response = operation.responses[String(refusal.status)];
          const named = method === 'head' || reasonsAt(response).includes(`"${refusal.reason}"`);
          if (!response || !named) missing.push(`${method} ${path} ${refusal.status} ${refusal.reason}`);
        }
    expect(missing).toEqual([]);
    expect(PROTOCOL_REFUSALS.map((r) => r.status).sort()).toEqual([400, 408, 413, 417, 431]);
  });

  it('a status the catalogue describes itself, which the gateway and the provider answer too, admits all three', () => {
    const source = JSON.parse(readFileSync(join(__dirname, '../../../config/operations.json'), 'utf8'));
    const own = {
      type: 'object',
      required: ['providerCode'],
      properties: { providerCode: { type: 'string' } },
    };
    source.paths['/api/validation/document'].post.responses['400'] = {
      description: 'The provider’s refusal.',
      content: { 'application/json': { schema: own } },
    };
    const file = join(tempDir('openapi-own-400'), 'operations.json');
    writeFileSync(file, JSON.stringify(source));
    const described = buildOpenApiDocument('test', loadCatalogue(file, { maxTimeoutMs: 10_000 })) as Record<
      string,
      any
    >;
    const anyOf =
      described.paths['/api/validation/document'].post.responses['400'].content['application/json'].schema
        .anyOf;
    expect(anyOf[0]).toEqual(own);
    expect(anyOf.slice(1).map((schema: any) => schema.$ref ?? schema.allOf?.[0]?.$ref)).toEqual([
      '#/components/schemas/ErrorEnvelope',
      '#/components/schemas/UpstreamError',
    ]);
  });

  it('lists the successes the catalogue does not, as the answer filter treats them (2XX: {} when strict, default when no 2xx)', () => {
    const source = JSON.parse(readFileSync(join(__dirname, '../../../config/operations.json'), 'utf8'));
    const plan = source.paths['/api/subscriptions/plan/{internalId}'].get;
    const declared = { type: 'object', properties: { name: { type: 'string' } } };
    const strictWith200 = structuredClone(plan);
    strictWith200['x-gateway'].answer = 'strict';
    strictWith200.operationId = 'strictWith200';
    const strictWithDefault = structuredClone(strictWith200);
    strictWithDefault.operationId = 'strictWithDefault';
    strictWithDefault.responses = {
      default: {
        description: 'Whatever the provider answers.',
        content: { 'application/json': { schema: declared } },
      },
    };
    const strictWith404 = structuredClone(strictWith200);
    strictWith404.operationId = 'strictWith404';
    strictWith404.responses = { '404': { description: 'No such plan.' } };
    const strictWithBareDefault = structuredClone(strictWith200);
    strictWithBareDefault.operationId = 'strictWithBareDefault';
    strictWithBareDefault.responses = {
      default: { description: 'A page.', content: { 'text/html': { schema: { type: 'string' } } } },
    };
    source.paths['/api/strict-200/{internalId}'] = { get: strictWith200 };
    source.paths['/api/strict-default/{internalId}'] = { get: strictWithDefault };
    source.paths['/api/strict-404/{internalId}'] = { get: strictWith404 };
    source.paths['/api/strict-bare-default/{internalId}'] = { get: strictWithBareDefault };
    const file = join(tempDir('openapi-unlisted-2xx'), 'operations.json');
    writeFileSync(file, JSON.stringify(source));
    const loaded = loadCatalogue(file, { maxTimeoutMs: 10_000 });
    const described = buildOpenApiDocument('test', loaded) as Record<string, any>;
    const answerOf = (id: string, status: number, body: object) => {
      const filter = loaded.operations.find((operation) => operation.id === id)?.filterAnswer;
      const answer = {
        status,
        headers: { 'content-type': 'application/json' },
        body: Buffer.from(JSON.stringify(body)),
      };
      return JSON.parse((filter ? filter(answer) : answer).body.toString());
    };
    // A strict operation listing 200: a 201 passes as {}, and the document says so.
    const strict200 = described.paths['/api/strict-200/{internalId}'].get.responses;
    expect(strict200['2XX'].content['application/json'].schema).toEqual({ type: 'object', maxProperties: 0 });
    expect(answerOf('strictWith200', 201, { name: 'x', secret: 1 })).toEqual({});
    // Listing no 2xx, `default` speaks for every success: filtered by it, and published as 2XX.
    const strictDefault = described.paths['/api/strict-default/{internalId}'].get.responses;
    expect(strictDefault['2XX'].content['application/json'].schema).toEqual(declared);
    expect(answerOf('strictWithDefault', 201, { name: 'x', secret: 1 })).toEqual({ name: 'x' });
    // No 2xx and no default: a success still answers {}.
    const strict404 = described.paths['/api/strict-404/{internalId}'].get.responses;
    expect(strict404['2XX'].content['application/json'].schema).toEqual({ type: 'object', maxProperties: 0 });
    expect(answerOf('strictWith404', 200, { name: 'x' })).toEqual({});
    // A default with no JSON schema: its own media types, and the {} a JSON success becomes.
    const bareDefault = described.paths['/api/strict-bare-default/{internalId}'].get.responses['2XX'].content;
    expect(Object.keys(bareDefault)).toEqual(['text/html', 'application/json']);
    expect(bareDefault['application/json'].schema).toEqual({ type: 'object', maxProperties: 0 });
    expect(answerOf('strictWithBareDefault', 200, { name: 'x' })).toEqual({});
    // A passthrough operation's unlisted successes pass as sent: no catch-all (generated clients would read unknown).
    expect(described.paths['/api/subscriptions/plan/{internalId}'].get.responses['2XX']).toBeUndefined();
  });

  it('keeps the case-insensitivity of the plan id in its pattern', () => {
    const pattern = new RegExp(
      document.paths['/api/subscriptions/plan/{internalId}'].get.parameters[0].schema.pattern,
    );
    expect(pattern.test('B8546575-5D4F-4A56-9E21-522D01CF5992')).toBe(true);
    expect(pattern.test('b8546575-5d4f-4a56-9e21-522d01cf5992')).toBe(true);
    expect(pattern.test('b8546575-5d4f-4a56-9e21-522d01cf599')).toBe(false);
    const plan = catalogue.operations.find((operation) => operation.id === 'plan');
    expect(
      plan?.request.validate({ internalId: 'B8546575-5D4F-4A56-9E21-522D01CF5992' }, undefined, undefined),
    ).toEqual({
      path: '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992',
    });
  });

  it('lists HEAD wherever GET answers it, and no 405 under a GET', () => {
    for (const [path, item] of Object.entries<Record<string, any>>(withSessions.paths)) {
      if (item.get) expect([path, Object.keys(item.head?.responses ?? {})]).not.toEqual([path, []]);
      if (item.get) expect([path, item.get.responses['405']]).toEqual([path, undefined]);
    }
    expect(Object.keys(withSessions.paths['/bff/callback'].head.responses)).toContain('405');
    const head = document.paths['/api/subscriptions/plan/{internalId}'].head;
    expect(head.responses['200'].content).toBeUndefined();
    expect(head.responses['200'].headers['X-Request-Id'].required).toBe(true);
  });

  it('declares the headers a client reads', () => {
    const plan = document.paths['/api/subscriptions/plan/{internalId}'].get.responses;
    expect(Object.keys(plan['200'].headers)).toEqual(
      expect.arrayContaining(['X-Request-Id', 'Cache-Control', 'RateLimit', 'RateLimit-Policy']),
    );
    expect(Object.keys(plan['429'].headers)).toContain('Retry-After');
    expect(plan['200'].headers['X-Upstream']).toBeUndefined();
    expect(document.components.responses.MethodNotAllowed.headers.Allow.required).toBe(true);
    expect(withSessions.paths['/bff/user'].get.responses['401'].headers.Link).toBeDefined();
    const local = buildOpenApiDocument('test', catalogue, { localMode: true }) as Record<string, any>;
    expect(local.paths['/healthz'].get.responses['200'].headers['X-Upstream'].required).toBe(true);
  });

  it("admits in returnTo's pattern what the gateway's rule accepts, and refuses what it refuses of //host and kin", () => {
    const pattern = new RegExp(withSessions.paths['/bff/login'].get.parameters[0].schema.pattern);
    const origin = 'https://bff.example.test';
    const accepted = ['/', '/orders?id=1#top', '/a//b', '/a%2F%2Fb', '/%C3%A9t%C3%A9', '/x/y.z'];
    const refused = [
      '//evil.test/x',
      '/\\evil.test',
      '/%2F%2Fevil.test',
      '/%5Cevil',
      'https://evil.test',
      'x',
      '/a b',
      '/a\u0000',
    ];
    for (const value of accepted)
      expect([value, pattern.test(value), safeReturnTo(value, origin)]).toEqual([
        value,
        true,
        expect.any(String),
      ]);
    for (const value of refused)
      expect([value, pattern.test(value), safeReturnTo(value, origin)]).toEqual([value, false, undefined]);
    // Beyond a pattern: what only decoding reveals, and /bff/* itself (answered 400 INVALID_REQUEST).
    for (const value of ['/%252F%252Fevil.test', '/bff/login', '/%00'])
      expect([value, pattern.test(value), safeReturnTo(value, origin)]).toEqual([value, true, undefined]);
  });
});
