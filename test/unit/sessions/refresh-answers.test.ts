// What the provider's token endpoint answers a revalidation, and what becomes of the session: any refusal (4xx, with
// or without an OAuth error, the client's own included) ends it; 5xx, 408 and 429 are outages that keep it.
import type { ServerResponse } from 'node:http';
import { parseClientRegistry } from '../../../src/callers/client-registry';
import { CLIENT_ID, type FakeProvider, sessionsAt, startFakeProvider } from './fake-provider';

let provider: FakeProvider;
beforeAll(async () => {
  provider = await startFakeProvider();
});
afterAll(() => provider.close());

const answer = (status: number, body: object) => (_req: unknown, res: ServerResponse) => {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  if (status === 401) res.setHeader('www-authenticate', 'Basic realm="provider"');
  res.end(JSON.stringify(body));
};

async function revalidateAgainst(respond: (req: unknown, res: ServerResponse) => void) {
  provider.tokenEndpoint = respond;
  const gateway = sessionsAt(provider);
  const { id } = await gateway.sessions.sessions.create({
    sub: 'alice',
    claimValues: [],
    refreshToken: 'rt',
  });
  await gateway.sessions.sessions.replaceGrant(id, { claimValues: [], revalidatedAt: 0, refreshToken: 'rt' });
  const record = await gateway.sessions.sessions.peek(id);
  if (!record) throw new Error('no session');
  gateway.sessions.revalidation.whenDue(id, record);
  await gateway.sessions.revalidation.idle();
  return gateway.sessions.sessions.peek(id);
}

describe('revalidation answers', () => {
  it('invalid_grant (revoked, expired or spent refresh token) ends the session', async () => {
    expect(await revalidateAgainst(answer(400, { error: 'invalid_grant' }))).toBeUndefined();
  });

  it.each([
    [401, 'invalid_client'],
    [400, 'invalid_client'],
    [400, 'unauthorized_client'],
  ])(
    '%i %s ends the session too: the provider no longer vouches for it (fail closed)',
    async (status, error) => {
      expect(await revalidateAgainst(answer(status, { error }))).toBeUndefined();
    },
  );

  it('a bare 400 with no error field ends the session (it was an outage, retried every 30 s, before)', async () => {
    const bare = (_req: unknown, res: ServerResponse) => {
      res.statusCode = 400;
      res.end();
    };
    expect(await revalidateAgainst(bare)).toBeUndefined();
  });

  it.each([
    [429, 'slow_down'],
    [408, 'timeout'],
    [503, 'temporarily_unavailable'],
    [500, 'server_error'],
  ])('%i %s keeps the session (later, not no: an outage)', async (status, error) => {
    expect(await revalidateAgainst(answer(status, { error }))).toBeDefined();
  });
});

describe("the refreshed ID token's claims", () => {
  const registry = parseClientRegistry(
    JSON.stringify({
      clients: [
        {
          id: CLIENT_ID,
          keys: [],
          scopes: ['plans:read'],
          session: { claim: 'groups', grants: { ops: ['plans:read'] } },
        },
      ],
    }),
    'clients.json',
  );
  const findWebApp = (id: string) => registry.webApps.get(id);

  async function afterRefresh(idTokenClaims: Record<string, unknown> | undefined) {
    const idToken = idTokenClaims && (await provider.idToken(idTokenClaims));
    provider.tokenEndpoint = answer(200, {
      access_token: 'at',
      token_type: 'Bearer',
      expires_in: 300,
      refresh_token: 'rt-2',
      ...(idToken ? { id_token: idToken } : {}),
    });
    const gateway = sessionsAt(provider, { registry: { findWebApp } });
    const { id } = await gateway.sessions.sessions.create({
      sub: 'alice',
      claimValues: ['ops'],
      refreshToken: 'rt',
    });
    await gateway.sessions.sessions.replaceGrant(id, {
      claimValues: ['ops'],
      revalidatedAt: 0,
      refreshToken: 'rt',
    });
    const record = await gateway.sessions.sessions.peek(id);
    if (!record) throw new Error('no session');
    gateway.sessions.revalidation.whenDue(id, record);
    await gateway.sessions.revalidation.idle();
    return gateway.sessions.sessions.peek(id);
  }

  it('a user removed from every group (the provider omits an empty groups claim) loses the scopes', async () => {
    const after = await afterRefresh({ sub: 'alice' });
    expect(after?.refreshToken).toBe('rt-2');
    expect(after?.claimValues).toEqual([]);
  });

  it('new groups in the refreshed ID token replace the old ones', async () => {
    expect((await afterRefresh({ sub: 'alice', groups: ['auditors'] }))?.claimValues).toEqual(['auditors']);
  });

  it('a refresh without an ID token keeps the groups of the last one', async () => {
    const after = await afterRefresh(undefined);
    expect(after?.refreshToken).toBe('rt-2');
    expect(after?.claimValues).toEqual(['ops']);
  });
});
