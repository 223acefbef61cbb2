// The doctor's session provider check against a real oidc-provider and a bare one, and its verdicts.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../../src/config/load-config';
import {
  type DevIdentityProvider,
  startDevIdentityProvider,
} from '../../../src/dev-identity-provider/dev-identity-provider';
import { runDoctor } from '../../../src/operations/doctor';
import {
  checkSessionProvider,
  diagnoseSessionProvider,
  sessionProviderStep,
} from '../../../src/operations/doctor-session-provider';
import { freePort } from '../../support/ports';
import { tempDir } from '../../support/temp-dir';
import { type FakeProvider, startFakeProvider } from '../sessions/fake-provider';
import { oneAccount } from './doctor-fakes';

const SECRET = 'session-client-secret-never-printed';

function registry(withWebApp: boolean): string {
  const file = join(tempDir('bff-doctor-sessions-'), 'clients.json');
  const webApp = {
    id: 'web-app',
    keys: [],
    scopes: ['plans:read'],
    session: { claim: 'groups', grants: { ops: ['plans:read'] } },
  };
  const other = { id: 'other', keys: [`sha256:${'a'.repeat(64)}`], scopes: ['plans:read'] };
  writeFileSync(file, JSON.stringify({ clients: withWebApp ? [webApp, other] : [other] }));
  return file;
}

const configFor = (issuer: string, clientsFile: string, extra: Record<string, string> = {}) =>
  loadConfig({
    ...extra,
    NODE_ENV: 'development',
    CLIENTS_FILE: clientsFile,
    SESSION_ISSUER: issuer,
    SESSION_CLIENT_ID: 'web-app',
    SESSION_CLIENT_SECRET: SECRET,
    SESSION_PUBLIC_URL: 'http://127.0.0.1:8080',
  });

describe('the session provider check', () => {
  let real: DevIdentityProvider;
  let bare: FakeProvider;
  beforeAll(async () => {
    [real, bare] = await Promise.all([
      startDevIdentityProvider({
        users: [],
        clients: [{ clientId: 'web-app', clientSecret: SECRET, origin: 'http://127.0.0.1:8080' }],
      }),
      startFakeProvider(),
    ]);
  });
  afterAll(() => Promise.all([real.close(), bare.close()]));

  it('passes against a provider offering code + PKCE S256, refresh, back-channel and RP logout', async () => {
    const check = await checkSessionProvider(configFor(real.issuer, registry(true)));
    expect(check).toEqual({ kind: 'discovered', issuer: real.issuer, problems: [], warnings: [] });
    expect(diagnoseSessionProvider(check!).state).toBe('pass');
  });

  it('fails when CLIENTS_FILE has no web app entry for SESSION_CLIENT_ID', async () => {
    const step = diagnoseSessionProvider(
      (await checkSessionProvider(configFor(real.issuer, registry(false))))!,
    );
    expect(step.state).toBe('fail');
    expect(step.detail).toContain('"web-app"');
  });

  it('warns about what a bare provider lacks (back-channel logout, end session)', async () => {
    const step = diagnoseSessionProvider(
      (await checkSessionProvider(configFor(bare.issuer, registry(true))))!,
    );
    expect(step.state).toBe('warn');
    expect(step.detail).toContain('back-channel logout');
    expect(step.detail).toContain('end_session_endpoint');
  });

  it('fails on an issuer that is not the one its discovery document names, or a path with no document', async () => {
    const localhost = real.issuer.replace('127.0.0.1', 'localhost');
    const mismatch = diagnoseSessionProvider(
      (await checkSessionProvider(configFor(localhost, registry(true))))!,
    );
    expect(mismatch.state).toBe('fail');
    expect(mismatch.detail).toContain('not SESSION_ISSUER');
    const path = diagnoseSessionProvider(
      (await checkSessionProvider(configFor(`${real.issuer}/oidc`, registry(true))))!,
    );
    expect(path.state).toBe('fail');
    expect(path.detail).toContain('HTTP 404');
  });

  it('fails when the token endpoint takes neither SESSION_CLIENT_AUTH_METHOD nor a secret method it could choose', async () => {
    bare.discoveryExtra = { token_endpoint_auth_methods_supported: ['client_secret_post'] };
    try {
      const explicit = diagnoseSessionProvider(
        (await checkSessionProvider(
          configFor(bare.issuer, registry(true), { SESSION_CLIENT_AUTH_METHOD: 'client_secret_basic' }),
        ))!,
      );
      expect(explicit.state).toBe('fail');
      expect(explicit.detail).toContain('SESSION_CLIENT_AUTH_METHOD=client_secret_basic');
      expect(explicit.detail).not.toContain(SECRET);
      // Unset, the gateway chooses client_secret_post from this list: nothing to say.
      expect(await checkSessionProvider(configFor(bare.issuer, registry(true)))).toMatchObject({
        problems: [],
      });
      bare.discoveryExtra = { token_endpoint_auth_methods_supported: ['private_key_jwt'] };
      const unset = diagnoseSessionProvider(
        (await checkSessionProvider(configFor(bare.issuer, registry(true))))!,
      );
      expect(unset.state).toBe('fail');
      expect(unset.detail).toContain('private_key_jwt');
    } finally {
      bare.discoveryExtra = undefined;
    }
  });

  it('an unreadable registry leaves the verdict to the registry step instead of failing the doctor', async () => {
    const check = await checkSessionProvider(configFor(real.issuer, '/nonexistent/clients.json'));
    expect(check).toMatchObject({ kind: 'discovered', problems: [] });
  });

  it('fails on an unreachable provider, naming the error and never the client secret', async () => {
    const issuer = `http://127.0.0.1:${await freePort()}`;
    const step = diagnoseSessionProvider((await checkSessionProvider(configFor(issuer, registry(true))))!);
    expect(step.state).toBe('fail');
    expect(step.detail).toContain('ECONNREFUSED');
    expect(JSON.stringify(step)).not.toContain(SECRET);
  });

  it('is a step of the report only when SESSION_ISSUER is set', async () => {
    const withSessions = configFor(real.issuer, registry(true));
    const without = loadConfig({ NODE_ENV: 'development', CLIENTS_FILE: registry(true) });
    const deps = (config: typeof without) => ({
      loadConfig: () => config,
      checkClients: () => ({ kind: 'loaded' as const, file: 'clients.json', clients: 2 }),
      checkStore: async () => ({ kind: 'memory' as const, reason: 'test' }),
      ...oneAccount({ kind: 'answer', target: 'test', status: 200, tokenIssued: true }),
      checkSessionProvider: sessionProviderStep,
    });
    const titles = async (config: typeof without) =>
      (await runDoctor(deps(config))).steps.map((step) => step.title);
    expect(await titles(withSessions)).toContain('session provider');
    expect(await titles(without)).not.toContain('session provider');
  });
});
