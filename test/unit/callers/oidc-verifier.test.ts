import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { SignJWT, UnsecuredJWT } from 'jose';
import type { Caller } from '../../../src/callers/caller';
import { createOidcVerifier, type OidcVerifierOptions } from '../../../src/callers/oidc-verifier';
import { GatewayError } from '../../../src/http/gateway-error';
import { createTestPki } from '../../support/test-certificates';
import { newSigningKey, startTestIssuer, type TestIssuer } from './support/oidc-test-issuer';

const AUDIENCE = 'payments-bff';

describe('OIDC bearer tokens against a local test issuer', () => {
  let issuer: TestIssuer;
  let options: OidcVerifierOptions;

  beforeAll(async () => {
    issuer = await startTestIssuer();
    options = {
      issuer: issuer.issuer,
      audience: AUDIENCE,
      jwksUrl: issuer.jwksUrl,
      clockToleranceSeconds: 30,
    };
  });
  afterAll(() => issuer.close());

  const refusal = async (verify: Promise<Caller>): Promise<string> => {
    const error = await verify.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).reason).toBe('CLIENT_UNAUTHENTICATED');
    return (error as GatewayError).detail;
  };

  test('a valid token gives a caller with its client id and scopes', async () => {
    const verifier = createOidcVerifier(options);
    const token = await issuer.sign({
      aud: AUDIENCE,
      azp: 'checkout-web',
      sub: 'user-1',
      scope: 'plans:read openid',
    });
    const caller = await verifier.verify(token);
    expect(caller).toMatchObject({ id: 'checkout-web', via: 'oidc', origins: [] });
    expect([...caller.scopes].sort()).toEqual(['openid', 'plans:read']);
  });

  test('scopes come from scp as an array or a string, and the client id from client_id', async () => {
    const verifier = createOidcVerifier(options);
    const asArray = await verifier.verify(
      await issuer.sign({ aud: AUDIENCE, client_id: 'svc-a', scp: ['documents:validate', 'plans:read'] }),
    );
    expect(asArray.id).toBe('svc-a');
    expect([...asArray.scopes].sort()).toEqual(['documents:validate', 'plans:read']);
    const asString = await verifier.verify(
      await issuer.sign({ aud: AUDIENCE, client_id: 'svc-a', scp: 'plans:read' }),
    );
    expect([...asString.scopes]).toEqual(['plans:read']);
  });

  test('azp and client_id name one client; a token naming two, or none, is refused (no fallback to sub)', async () => {
    const verifier = createOidcVerifier(options);
    const both = await verifier.verify(await issuer.sign({ aud: AUDIENCE, azp: 'web', client_id: 'web' }));
    expect(both.id).toBe('web');
    // Which app is it? The registry entry of one would limit and lend to a token of the other (adv-42).
    expect(
      await refusal(verifier.verify(await issuer.sign({ aud: AUDIENCE, azp: 'web', client_id: 'other' }))),
    ).toBe('The bearer token names two clients (azp and client_id differ).');
    expect(await refusal(verifier.verify(await issuer.sign({ aud: AUDIENCE, sub: 'user-1' })))).toContain(
      'names no client',
    );
  });

  test('a registry client with the same id lends its rate limit, origins, accounts, priority and quota', async () => {
    const known: Caller = {
      id: 'checkout-web',
      scopes: new Set(['plans:read']),
      via: 'api-key',
      rateLimit: { limit: 5, windowSeconds: 60 },
      priority: 'critical',
      quota: { day: 100, timeZone: 'America/Sao_Paulo' },
      accounts: ['production', 'sandbox'],
      origins: ['https://checkout.internal.example'],
    };
    const verifier = createOidcVerifier({
      ...options,
      registry: { findById: (id) => (id === known.id ? known : undefined), listsSsoClients: () => true },
    });
    const caller = await verifier.verify(
      await issuer.sign({ aud: AUDIENCE, azp: 'checkout-web', scope: 'plans:read' }),
    );
    expect(caller.rateLimit).toEqual({ limit: 5, windowSeconds: 60 });
    expect(caller.origins).toEqual(['https://checkout.internal.example']);
    expect(caller.accounts).toEqual(['production', 'sandbox']);
    expect(caller.priority).toBe('critical');
    expect(caller.quota).toEqual({ day: 100, timeZone: 'America/Sao_Paulo' });
    expect([...caller.scopes]).toEqual(['plans:read']);
  });

  describe('SSO clients and the registry (issue 42)', () => {
    const entry: Caller = {
      id: 'reports-web',
      scopes: new Set(['plans:read']),
      via: 'api-key',
      accounts: ['production'],
      origins: [],
    };
    const registry = (listsSsoClients: boolean) => ({
      findById: (id: string) => (id === entry.id ? entry : undefined),
      listsSsoClients: () => listsSsoClients,
    });
    const forbidden = async (verify: Promise<Caller>) => {
      const error = await verify.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ reason: 'CLIENT_FORBIDDEN', status: 403 });
      return (error as GatewayError).detail;
    };

    test("the granted scopes are the token's scopes that the entry lists too", async () => {
      const verifier = createOidcVerifier({ ...options, registry: registry(true) });
      const caller = await verifier.verify(
        await issuer.sign({ aud: AUDIENCE, azp: 'reports-web', scope: 'plans:read documents:validate' }),
      );
      expect([...caller.scopes]).toEqual(['plans:read']);
      const none = await verifier.verify(
        await issuer.sign({ aud: AUDIENCE, azp: 'reports-web', scope: 'documents:validate' }),
      );
      expect([...none.scopes]).toEqual([]);
    });

    test('a client with no entry is refused 403 while the registry lists SSO clients', async () => {
      const token = await issuer.sign({ aud: AUDIENCE, azp: 'stranger-web', scope: 'plans:read' });
      expect(
        await forbidden(createOidcVerifier({ ...options, registry: registry(true) }).verify(token)),
      ).toBe('The SSO client "stranger-web" is not in the client registry of this gateway.');
    });

    test('a client with no entry is refused in production (registeredClientsOnly) even when the registry lists none', async () => {
      const token = await issuer.sign({ aud: AUDIENCE, azp: 'stranger-web', scope: 'plans:read' });
      await forbidden(
        createOidcVerifier({ ...options, registry: registry(false), registeredClientsOnly: true }).verify(
          token,
        ),
      );
    });

    test('outside production, with no SSO client listed, a client with no entry keeps its token scopes', async () => {
      const caller = await createOidcVerifier({ ...options, registry: registry(false) }).verify(
        await issuer.sign({ aud: AUDIENCE, azp: 'stranger-web', scope: 'plans:read documents:validate' }),
      );
      expect([...caller.scopes].sort()).toEqual(['documents:validate', 'plans:read']);
    });
  });

  describe('the token type (typ header, RFC 9068; issue 42)', () => {
    const claims = { aud: AUDIENCE, azp: 'checkout-web', sub: 'user-1', scope: 'plans:read' };

    test('an ID token (typ JWT) whose audience is the gateway is refused as an access token', async () => {
      const detail = await refusal(
        createOidcVerifier(options).verify(await issuer.sign(claims, { typ: 'JWT' })),
      );
      expect(detail).toBe('The bearer token is not an access token (its "typ" header names another type).');
      for (const typ of ['id+jwt', 'logout+jwt', 'application/jwt'])
        await refusal(createOidcVerifier(options).verify(await issuer.sign(claims, { typ })));
    });

    test('at+jwt passes however it is written, and so does a token without typ (many issuers omit it)', async () => {
      const verifier = createOidcVerifier(options);
      for (const typ of ['at+jwt', 'AT+JWT', 'application/at+jwt', null])
        expect((await verifier.verify(await issuer.sign(claims, { typ }))).id).toBe('checkout-web');
    });

    test('OIDC_ACCESS_TOKEN_TYPES names what the issuer writes instead (an issuer that types access tokens JWT)', async () => {
      const verifier = createOidcVerifier({ ...options, accessTokenTypes: ['at+jwt', 'jwt'] });
      expect((await verifier.verify(await issuer.sign(claims, { typ: 'JWT' }))).id).toBe('checkout-web');
      await refusal(verifier.verify(await issuer.sign(claims, { typ: 'logout+jwt' })));
    });
  });

  test('an expired token is refused beyond the clock tolerance, accepted within it', async () => {
    const verifier = createOidcVerifier(options);
    const withinTolerance = await issuer.sign({ aud: AUDIENCE, azp: 'web' }, { expiresInSeconds: -10 });
    await expect(verifier.verify(withinTolerance)).resolves.toMatchObject({ id: 'web' });
    const expired = await issuer.sign({ aud: AUDIENCE, azp: 'web' }, { expiresInSeconds: -120 });
    expect(await refusal(verifier.verify(expired))).toBe('The bearer token has expired.');
  });

  test('a token not yet valid beyond the tolerance is refused', async () => {
    const verifier = createOidcVerifier(options);
    const future = Math.floor(Date.now() / 1000) + 600;
    const token = await issuer.sign({ aud: AUDIENCE, azp: 'web', nbf: future, exp: future + 300 });
    expect(await refusal(verifier.verify(token))).toBe('The bearer token is not valid yet.');
  });

  test('a token without exp is refused', async () => {
    const verifier = createOidcVerifier(options);
    const key = issuer.keys[0]!;
    const token = await new SignJWT({ iss: issuer.issuer, aud: AUDIENCE, azp: 'web' })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid })
      .sign(key.privateKey);
    await refusal(verifier.verify(token));
  });

  test('a wrong audience or issuer is refused', async () => {
    const verifier = createOidcVerifier(options);
    expect(await refusal(verifier.verify(await issuer.sign({ aud: 'someone-else', azp: 'web' })))).toContain(
      'audience',
    );
    expect(
      await refusal(
        verifier.verify(await issuer.sign({ aud: AUDIENCE, azp: 'web', iss: 'https://evil.example' })),
      ),
    ).toContain('issuer');
  });

  test('a signature by another key with a known kid is refused', async () => {
    const verifier = createOidcVerifier(options);
    const impostor = await newSigningKey(issuer.keys[0]!.kid);
    const token = await issuer.sign({ aud: AUDIENCE, azp: 'web' }, { key: impostor });
    expect(await refusal(verifier.verify(token))).toContain('signature');
  });

  test('HS256 and unsigned (alg none) tokens are refused', async () => {
    const verifier = createOidcVerifier(options);
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: issuer.issuer, aud: AUDIENCE, azp: 'web', exp: now + 300 };
    const hs256 = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', kid: issuer.keys[0]!.kid })
      .sign(new TextEncoder().encode('a-shared-secret-of-at-least-32-bytes!!'));
    expect(await refusal(verifier.verify(hs256))).toContain('algorithm');
    const none = new UnsecuredJWT(claims).encode();
    await refusal(verifier.verify(none));
    await refusal(verifier.verify('not-a-jwt'));
  });

  test('key rotation: a token signed by a new kid is accepted once the JWKS publishes it', async () => {
    const verifier = createOidcVerifier({ ...options, jwksCooldownMs: 0 });
    await verifier.verify(await issuer.sign({ aud: AUDIENCE, azp: 'web' }));
    const fetchesBefore = issuer.jwksFetches;
    const next = await newSigningKey();
    issuer.keys = [next, ...issuer.keys];
    await expect(
      verifier.verify(await issuer.sign({ aud: AUDIENCE, azp: 'web' }, { key: next })),
    ).resolves.toMatchObject({
      id: 'web',
    });
    expect(issuer.jwksFetches).toBe(fetchesBefore + 1);
    // Cached keys: further tokens need no fetch.
    await verifier.verify(await issuer.sign({ aud: AUDIENCE, azp: 'web' }, { key: next }));
    expect(issuer.jwksFetches).toBe(fetchesBefore + 1);
  });

  test('without OIDC_JWKS_URL the jwks_uri comes from the discovery document', async () => {
    const verifier = createOidcVerifier({ ...options, jwksUrl: undefined });
    await expect(verifier.verify(await issuer.sign({ aud: AUDIENCE, azp: 'web' }))).resolves.toMatchObject({
      id: 'web',
    });
  });

  test('an unreachable issuer is a 401 that blames the keys, and the operator is told', async () => {
    const warnings: string[] = [];
    const verifier = createOidcVerifier({
      ...options,
      jwksUrl: 'http://127.0.0.1:1/jwks',
      fetchTimeoutMs: 500,
      logger: { warn: (_fields, message) => warnings.push(message) },
    });
    const detail = await refusal(verifier.verify(await issuer.sign({ aud: AUDIENCE, azp: 'web' })));
    expect(detail).toContain('issuer keys are unavailable');
    expect(warnings).toEqual(['OIDC issuer keys unavailable']);
  });
});

describe('an issuer outage is remembered for a few seconds', () => {
  let issuer: TestIssuer;
  beforeEach(async () => {
    issuer = await startTestIssuer();
  });
  afterEach(() => issuer.close());

  const burst = async (verify: (token: string) => Promise<Caller>, size: number) => {
    const token = await issuer.sign({ aud: AUDIENCE, azp: 'web' });
    const concurrent = Array.from({ length: size }, () =>
      verify(token).then(
        () => 200,
        () => 401,
      ),
    );
    const sequential: number[] = [];
    for (let i = 0; i < size; i++)
      sequential.push(
        await verify(token).then(
          () => 200,
          () => 401,
        ),
      );
    return [...(await Promise.all(concurrent)), ...sequential];
  };

  test('a failing JWKS endpoint is asked once for a burst of 40 bearer requests, and told once', async () => {
    issuer.failWith = 503;
    const warnings: string[] = [];
    const verifier = createOidcVerifier({
      issuer: issuer.issuer,
      audience: AUDIENCE,
      jwksUrl: issuer.jwksUrl,
      clockToleranceSeconds: 0,
      logger: { warn: (_fields, message) => warnings.push(message) },
    });
    const statuses = await burst((token) => verifier.verify(token), 20);
    expect(statuses).toEqual(Array(40).fill(401));
    expect(issuer.jwksFetches).toBe(1);
    expect(warnings).toEqual(['OIDC issuer keys unavailable']);
  });

  test('a failing discovery document is asked once for a burst of 40 bearer requests', async () => {
    issuer.failWith = 500;
    const verifier = createOidcVerifier({
      issuer: issuer.issuer,
      audience: AUDIENCE,
      clockToleranceSeconds: 0,
    });
    expect(await burst((token) => verifier.verify(token), 20)).toEqual(Array(40).fill(401));
    expect(issuer.discoveryFetches).toBe(1);
    expect(issuer.jwksFetches).toBe(0);
  });

  test('once the memory has passed the issuer is asked again, and a recovered issuer is used', async () => {
    issuer.failWith = 502;
    const verifier = createOidcVerifier({
      issuer: issuer.issuer,
      audience: AUDIENCE,
      clockToleranceSeconds: 0,
      issuerFailureMemoryMs: 300,
    });
    const token = await issuer.sign({ aud: AUDIENCE, azp: 'web' });
    await expect(verifier.verify(token)).rejects.toBeInstanceOf(GatewayError);
    await expect(verifier.verify(token)).rejects.toBeInstanceOf(GatewayError);
    expect(issuer.discoveryFetches).toBe(1);
    issuer.failWith = undefined;
    await new Promise((resolve) => setTimeout(resolve, 350));
    await expect(verifier.verify(token)).resolves.toMatchObject({ id: 'web' });
    expect(issuer.discoveryFetches).toBe(2);
    expect(issuer.jwksFetches).toBe(1);
  });

  test('a JWKS that answers 200 with something other than a key set is remembered as a failure too', async () => {
    const verifier = createOidcVerifier({
      issuer: issuer.issuer,
      audience: AUDIENCE,
      jwksUrl: `${issuer.issuer}/.well-known/openid-configuration`, // JSON, but no "keys"
      clockToleranceSeconds: 0,
    });
    expect(await burst((token) => verifier.verify(token), 5)).toEqual(Array(10).fill(401));
    expect(issuer.discoveryFetches).toBe(1);
  });
});

describe('an https issuer whose discovery document sends the keys over plain http', () => {
  let keys: TestIssuer;
  let discovery: HttpsServer;
  let httpsIssuer: string;
  /** The issuer the discovery document names: the one the verifier was configured with. */
  let servedIssuer: string;
  /** The jwks_uri the discovery document names: by default the test issuer's http one. */
  let servedJwksUri: string;
  let discoveryFetches = 0;
  const defaultCas = getCACertificates('default');

  beforeAll(async () => {
    const pki = await createTestPki();
    // The process trusts the test CA, as a deployment trusts its issuer's (restored after these tests).
    setDefaultCACertificates([...defaultCas, pki.caPem]);
    keys = await startTestIssuer();
    // As an issuer behind a TLS proxy that forgot X-Forwarded-Proto advertises: its jwks_uri is http://.
    discovery = createHttpsServer({ cert: pki.good.cert, key: pki.good.key }, (_req, res) => {
      discoveryFetches += 1;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ issuer: servedIssuer, jwks_uri: servedJwksUri }));
    });
    await new Promise<void>((resolve) => discovery.listen(0, '127.0.0.1', resolve));
    httpsIssuer = `https://127.0.0.1:${(discovery.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    servedIssuer = httpsIssuer;
    servedJwksUri = keys.jwksUrl;
    discoveryFetches = 0;
  });
  afterAll(async () => {
    setDefaultCACertificates(defaultCas);
    await keys.close();
    await new Promise((resolve) => discovery.close(resolve));
  });

  /** A verifier of `issuer` without a configured JWKS URL (it discovers one), and the warnings it logs. */
  const warnedVerifier = (issuer: string) => {
    const warnings: unknown[] = [];
    const verifier = createOidcVerifier({
      issuer,
      audience: AUDIENCE,
      clockToleranceSeconds: 30,
      logger: { warn: (fields) => warnings.push(fields) },
    });
    return { verifier, warnings };
  };
  const outcomeOf = (verifier: { verify(token: string): Promise<Caller> }, token: string) =>
    verifier.verify(token).then(
      () => 'verified',
      (error: GatewayError) => error.reason,
    );

  test('refuses the keys (401) and tells the operator, instead of trusting keys fetched in clear', async () => {
    const { verifier, warnings } = warnedVerifier(httpsIssuer);
    const token = await keys.sign({ iss: httpsIssuer, aud: AUDIENCE, azp: 'web' });
    expect(await outcomeOf(verifier, token)).toBe('CLIENT_UNAUTHENTICATED');
    expect(JSON.stringify(warnings)).toMatch(/jwks_uri is not https/);
    expect(keys.jwksFetches).toBe(0);
  });

  test('an issuer written HTTPS:// (an https URL, as the production rule reads it) is held to https keys too', async () => {
    const upperCaseIssuer = httpsIssuer.replace('https://', 'HTTPS://');
    servedIssuer = upperCaseIssuer;
    const { verifier, warnings } = warnedVerifier(upperCaseIssuer);
    const token = await keys.sign({ iss: upperCaseIssuer, aud: AUDIENCE, azp: 'web' });
    const outcomes: string[] = [];
    for (const _request of [1, 2]) outcomes.push(await outcomeOf(verifier, token));
    expect(outcomes).toEqual(['CLIENT_UNAUTHENTICATED', 'CLIENT_UNAUTHENTICATED']);
    // The refusal is remembered like any failed discovery: the request after it did not ask again.
    expect(discoveryFetches).toBe(1);
    expect(JSON.stringify(warnings)).toMatch(/jwks_uri is not https/);
    expect(keys.jwksFetches).toBe(0);
  });

  test('a relative jwks_uri is refused in words that name it, not a bare "Invalid URL"', async () => {
    servedJwksUri = '/jwks';
    const { verifier, warnings } = warnedVerifier(httpsIssuer);
    const token = await keys.sign({ iss: httpsIssuer, aud: AUDIENCE, azp: 'web' });
    await expect(verifier.verify(token)).rejects.toMatchObject({ reason: 'CLIENT_UNAUTHENTICATED' });
    expect(JSON.stringify(warnings)).toMatch(/jwks_uri is not an absolute URL/);
  });
});
