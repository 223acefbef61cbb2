import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { authenticate, requireScope } from '../../../src/callers/authenticate';
import { loadClientRegistry } from '../../../src/callers/client-registry';
import { createOidcVerifier } from '../../../src/callers/oidc-verifier';
import { tempDir } from '../../support/temp-dir';
import { startTestIssuer, type TestIssuer } from './support/oidc-test-issuer';
import { memoryLogger, testApp } from './support/test-app';

const KEY = 'pbk_unit-test-key-0123456789';
const READ_ONLY_KEY = 'pbk_read-only-key-0123456789';
const hash = (key: string) => `sha256:${createHash('sha256').update(key).digest('hex')}`;

const dir = tempDir('bff-auth-');
writeFileSync(
  join(dir, 'clients.json'),
  JSON.stringify({
    clients: [
      { id: 'checkout-web', keys: [hash(KEY)], scopes: ['documents:validate', 'plans:read'] },
      { id: 'reporting', keys: [hash(READ_ONLY_KEY)], scopes: ['plans:read'] },
    ],
  }),
);
const registry = loadClientRegistry(join(dir, 'clients.json'), { logger: memoryLogger(), watch: false });

describe('authenticate with API keys', () => {
  const app = testApp(authenticate({ registry }), requireScope('documents:validate'));

  test('no credential is 401 CLIENT_UNAUTHENTICATED in the envelope', async () => {
    const res = await request(app).get('/x').expect(401);
    expect(res.body).toEqual({
      status: { code: '401', description: 'CLIENT_UNAUTHENTICATED', detail: expect.any(String) },
      requestId: res.headers['x-request-id'],
    });
  });

  test('a wrong key is 401 and the answer never contains it', async () => {
    const res = await request(app).get('/x').set('X-API-Key', 'pbk_guessed-key-123').expect(401);
    expect(res.body.status.description).toBe('CLIENT_UNAUTHENTICATED');
    expect(JSON.stringify(res.body) + JSON.stringify(res.headers)).not.toContain('pbk_guessed-key-123');
  });

  test('a valid key with the scope passes and sets req.caller', async () => {
    const res = await request(app).get('/x').set('X-API-Key', KEY).expect(200);
    expect(res.body.caller).toEqual({ id: 'checkout-web', via: 'api-key' });
  });

  test('a valid key without the route scope is 403 CLIENT_FORBIDDEN naming the scope', async () => {
    const res = await request(app).get('/x').set('X-API-Key', READ_ONLY_KEY).expect(403);
    expect(res.body.status.description).toBe('CLIENT_FORBIDDEN');
    expect(res.body.status.detail).toContain('documents:validate');
    expect(JSON.stringify(res.body)).not.toContain(READ_ONLY_KEY);
  });

  test('a bearer token is refused when no OIDC issuer is configured, without echoing it', async () => {
    const res = await request(app).get('/x').set('Authorization', 'Bearer abc.def.ghi').expect(401);
    expect(res.body.status.detail).toContain('X-API-Key');
    expect(JSON.stringify(res.body)).not.toContain('abc.def.ghi');
  });

  test('a non-Bearer Authorization header is 401', async () => {
    await request(app).get('/x').set('Authorization', 'Basic dXNlcjpwYXNz').expect(401);
  });
});

describe('authenticate with SSO bearer tokens', () => {
  let issuer: TestIssuer;
  let app: ReturnType<typeof testApp>;
  beforeAll(async () => {
    issuer = await startTestIssuer();
    const oidc = createOidcVerifier({
      issuer: issuer.issuer,
      audience: 'payments-bff',
      jwksUrl: issuer.jwksUrl,
      clockToleranceSeconds: 30,
    });
    app = testApp(authenticate({ registry, oidc }), requireScope('plans:read'));
  });
  afterAll(() => issuer.close());

  test('a valid token with the scope passes', async () => {
    const token = await issuer.sign({ aud: 'payments-bff', azp: 'checkout-web', scope: 'plans:read' });
    const res = await request(app).get('/x').set('Authorization', `Bearer ${token}`).expect(200);
    expect(res.body.caller).toEqual({ id: 'checkout-web', via: 'oidc' });
  });

  test('a valid token without the scope is 403', async () => {
    const token = await issuer.sign({
      aud: 'payments-bff',
      azp: 'checkout-web',
      scope: 'documents:validate',
    });
    const res = await request(app).get('/x').set('Authorization', `Bearer ${token}`).expect(403);
    expect(res.body.status.detail).toContain('plans:read');
  });

  test('an expired token is 401 and the answer never contains it', async () => {
    const token = await issuer.sign(
      { aud: 'payments-bff', azp: 'web', scope: 'plans:read' },
      { expiresInSeconds: -600 },
    );
    const res = await request(app).get('/x').set('Authorization', `Bearer ${token}`).expect(401);
    expect(res.body.status.detail).toBe('The bearer token has expired.');
    expect(JSON.stringify(res.body) + JSON.stringify(res.headers)).not.toContain(token.split('.')[2]);
  });

  test('X-API-Key wins when both credentials are sent', async () => {
    const token = await issuer.sign({ aud: 'payments-bff', azp: 'web', scope: 'plans:read' });
    const res = await request(app)
      .get('/x')
      .set('X-API-Key', KEY)
      .set('Authorization', `Bearer ${token}`)
      .expect(200);
    expect(res.body.caller.via).toBe('api-key');
  });
});
