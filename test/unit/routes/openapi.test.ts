import { execFileSync } from 'node:child_process';
import { buildOpenApiDocument } from '../../../src/routes/openapi';
import { documentValidationRequest } from '../../../src/routes/schemas';

describe('the OpenAPI document', () => {
  const document = buildOpenApiDocument('test') as Record<string, any>;
  const withSessions = buildOpenApiDocument('test', { sessions: true }) as Record<string, any>;

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

  it('documents the request schema from the same zod schema that validates requests', () => {
    const schema = document.components.schemas.DocumentValidationRequest;
    expect(schema.required).toEqual(['country', 'document']);
    expect(schema.properties.country.enum).toEqual(expect.arrayContaining(['ARG', 'BRA', 'MEX']));
    expect(schema.properties.country.enum).not.toContain('ARQ');
    expect(schema.properties.document.properties.type.pattern).toBe('^[A-Z0-9_]+$');
    expect(schema.properties.document.properties.id.maxLength).toBe(
      documentValidationRequest.shape.document.shape.id.maxLength,
    );
    const plan = document.paths['/api/subscriptions/plan/{internalId}'].get;
    expect(plan.parameters[0].schema.pattern).toMatch(/0-9a-f/);
  });

  it('documents the error envelope and the reasons on each operation', () => {
    const envelope = document.components.schemas.ErrorEnvelope;
    expect(envelope.required).toEqual(expect.arrayContaining(['status', 'requestId']));
    const post = document.paths['/api/validation/document'].post.responses;
    expect(Object.keys(post)).toEqual(
      expect.arrayContaining(['200', '400', '401', '403', '413', '415', '429', '502', '503', '504']),
    );
    expect(post['400'].description).toContain('INVALID_REQUEST');
    expect(post['400'].content['application/json'].schema.$ref).toBe('#/components/schemas/ErrorEnvelope');
  });
});
