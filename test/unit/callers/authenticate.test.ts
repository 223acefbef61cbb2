import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Agent, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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

describe('a keep-alive connection remembers its last valid key', () => {
  /** Requests over one keep-alive connection (or a new one each), against a real server. */
  async function serve(options: Parameters<typeof authenticate>[0]) {
    const server: Server = await new Promise((resolve) => {
      const s = testApp(authenticate(options)).listen(0, '127.0.0.1', () => resolve(s));
    });
    const { port } = server.address() as AddressInfo;
    const agents: Agent[] = [];
    const connection = () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      agents.push(agent);
      return (key: string) =>
        new Promise<{ status: number; localPort: number }>((resolve, reject) => {
          get({ host: '127.0.0.1', port, path: '/x', agent, headers: { 'x-api-key': key } }, (res) => {
            const localPort = res.socket.localPort ?? 0; // the socket goes back to the agent at 'end'
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, localPort }));
          }).on('error', reject);
        });
    };
    const close = async () => {
      for (const agent of agents) agent.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    };
    return { connection, close };
  }

  /** The registry above, counting its (hashing) key lookups. */
  function countingRegistry(target = registry) {
    const counted = {
      lookups: 0,
      findById: target.findById,
      findByApiKey: (key: string) => {
        counted.lookups++;
        return target.findByApiKey(key);
      },
    };
    return counted;
  }

  test('the same key again on the same connection is not looked up again; on a new connection it is', async () => {
    const counting = countingRegistry();
    const { connection, close } = await serve({ registry: counting });
    try {
      const send = connection();
      const answers = [await send(KEY), await send(KEY), await send(KEY)];
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
      expect(new Set(answers.map((a) => a.localPort)).size).toBe(1); // one connection
      expect(counting.lookups).toBe(1);
      expect((await connection()(KEY)).status).toBe(200);
      expect(counting.lookups).toBe(2);
    } finally {
      await close();
    }
  });

  test('another key on that connection is looked up: a wrong one of the same length is refused, a valid one named', async () => {
    const counting = countingRegistry();
    const { connection, close } = await serve({ registry: counting });
    try {
      const send = connection();
      expect((await send(KEY)).status).toBe(200);
      const oneCharOff = `${KEY.slice(0, -1)}${KEY.endsWith('0') ? '1' : '0'}`;
      expect((await send(oneCharOff)).status).toBe(401);
      expect((await send(READ_ONLY_KEY)).status).toBe(200); // reporting: passes authenticate (no scope here)
      expect((await send(KEY)).status).toBe(200);
      expect(counting.lookups).toBe(4);
    } finally {
      await close();
    }
  });

  test('a key removed by a registry reload is refused on a connection that presented it before', async () => {
    const file = join(tempDir('bff-auth-reload-'), 'clients.json');
    const clients = (keys: string[]) =>
      JSON.stringify({ clients: [{ id: 'checkout-web', keys: keys.map(hash), scopes: ['plans:read'] }] });
    writeFileSync(file, clients([KEY, READ_ONLY_KEY]));
    const reloadable = loadClientRegistry(file, { logger: memoryLogger(), watch: false });
    const { connection, close } = await serve({ registry: reloadable });
    try {
      const send = connection();
      expect((await send(KEY)).status).toBe(200);
      expect((await send(KEY)).status).toBe(200);
      writeFileSync(file, clients([READ_ONLY_KEY]));
      expect(reloadable.reload()).toBe(true);
      expect((await send(KEY)).status).toBe(401);
      expect((await send(READ_ONLY_KEY)).status).toBe(200);
    } finally {
      await close();
      reloadable.close();
    }
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
