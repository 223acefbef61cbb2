import { createHash } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ClientRegistryError,
  loadClientRegistry,
  parseClientRegistry,
} from '../../../src/callers/client-registry';
import { waitFor } from '../../support/ports';
import { tempDir } from '../../support/temp-dir';
import { memoryLogger } from './support/test-app';

const hash = (key: string) => `sha256:${createHash('sha256').update(key).digest('hex')}`;

function registryText(clients: unknown[]): string {
  return JSON.stringify({ clients });
}

const checkout = {
  id: 'checkout-web',
  keys: [hash('old-key'), hash('new-key')],
  scopes: ['documents:validate', 'plans:read'],
  rateLimit: { limit: 600, windowSeconds: 60 },
  origins: ['https://Checkout.internal.example'],
};
const mobile = { id: 'mobile-backend', keys: [hash('mobile-key')], scopes: ['plans:read'] };

function tempFile(content: string): { dir: string; file: string } {
  const dir = tempDir('bff-registry-');
  const file = join(dir, 'clients.json');
  writeFileSync(file, content);
  return { dir, file };
}

describe('client registry file validation', () => {
  const problemsOf = (clients: unknown[]): string => {
    try {
      parseClientRegistry(registryText(clients), 'clients.json');
    } catch (error) {
      expect(error).toBeInstanceOf(ClientRegistryError);
      return (error as Error).message;
    }
    throw new Error('expected the registry to be refused');
  };

  test('accepts the documented format', () => {
    const snapshot = parseClientRegistry(registryText([checkout, mobile]), 'clients.json');
    expect(snapshot.byId.size).toBe(2);
  });

  test('a quota: whole numbers of calls per day and/or month, a known timezone (UTC by default)', () => {
    const snapshot = parseClientRegistry(
      registryText([
        { ...mobile, quota: { day: 200, timezone: 'America/Sao_Paulo' } },
        { ...checkout, quota: { month: 0 } },
      ]),
      'clients.json',
    );
    expect(snapshot.byId.get('mobile-backend')?.quota).toEqual({
      day: 200,
      month: undefined,
      timeZone: 'America/Sao_Paulo',
    });
    expect(snapshot.byId.get(checkout.id)?.quota).toEqual({ day: undefined, month: 0, timeZone: 'UTC' });
  });

  test.each([
    [{ day: -1 }, 'quota.day: must be 0 or more'],
    [{ day: 1.5 }, 'quota.day: must be a whole number of calls'],
    [{ month: '100' }, 'quota.month: must be a whole number of calls'],
    [{ day: 10, timezone: 'Mars/Olympus_Mons' }, 'quota.timezone: must be a known IANA timezone'],
    [{ timezone: 'UTC' }, 'quota: must set "day", "month" or both'],
    [{ day: 10, week: 50 }, 'quota'],
  ])('a bad quota %j is refused naming the client and the field', (quota, expected) => {
    const message = problemsOf([{ ...mobile, quota }]);
    expect(message).toContain('client "mobile-backend" (clients[0])');
    expect(message).toContain(expected);
  });

  test('a malformed scope is refused naming the client (any well-formed scope an operation may require is not)', () => {
    const registry = registryText([{ ...mobile, scopes: ['subscriptions:read'] }]);
    expect(() => parseClientRegistry(registry, 'clients.json')).not.toThrow();
    const message = problemsOf([{ ...mobile, scopes: ['plans read'] }]);
    expect(message).toContain('client "mobile-backend"');
    expect(message).toContain('scopes[0]');
  });

  test('a key that is not a sha256 hash is refused without echoing it', () => {
    const message = problemsOf([{ ...mobile, keys: ['my-plain-secret-key'] }]);
    expect(message).toContain('client "mobile-backend"');
    expect(message).toContain('keys[0]');
    expect(message).not.toContain('my-plain-secret-key');
  });

  test('a hash with the wrong length is refused without echoing it', () => {
    const short = `sha256:${'ab'.repeat(20)}`;
    const message = problemsOf([{ ...mobile, keys: [short] }]);
    expect(message).not.toContain('abab');
  });

  test('duplicate client ids are refused', () => {
    expect(problemsOf([mobile, { ...mobile, keys: [hash('other')] }])).toContain(
      'client "mobile-backend" appears more than once',
    );
  });

  test('a key hash used by two clients is refused, naming both and not the hash', () => {
    const message = problemsOf([checkout, { ...mobile, keys: [hash('new-key')] }]);
    expect(message).toContain('client "mobile-backend" keys[0] is also a key hash of client "checkout-web"');
    expect(message).not.toContain(hash('new-key').slice(7, 20));
  });

  test('unknown fields, bad limits and bad origins are refused', () => {
    expect(problemsOf([{ ...mobile, colour: 'red' }])).toContain('colour');
    expect(problemsOf([{ ...mobile, rateLimit: { limit: 0, windowSeconds: 60 } }])).toContain(
      'rateLimit.limit',
    );
    expect(problemsOf([{ ...mobile, origins: ['https://a.example/path'] }])).toContain('origins[0]');
  });

  test('text that is not JSON is refused', () => {
    expect(() => parseClientRegistry('{"clients": [', 'clients.json')).toThrow('is not valid JSON');
  });
});

describe('client registry lookups', () => {
  const { file } = tempFile(registryText([checkout, mobile]));
  const registry = loadClientRegistry(file, { logger: memoryLogger(), watch: false });
  afterAll(() => registry.close());

  test('each of several keys of a client finds it (rotation)', () => {
    expect(registry.findByApiKey('old-key')?.id).toBe('checkout-web');
    expect(registry.findByApiKey('new-key')?.id).toBe('checkout-web');
    expect(registry.findByApiKey('mobile-key')?.id).toBe('mobile-backend');
  });

  test('unknown, empty and oversized keys find nobody', () => {
    expect(registry.findByApiKey('nope')).toBeUndefined();
    expect(registry.findByApiKey('')).toBeUndefined();
    expect(registry.findByApiKey('x'.repeat(10_000))).toBeUndefined();
  });

  test('a found caller carries scopes, limit and normalized origins', () => {
    const caller = registry.findByApiKey('new-key')!;
    expect(caller.via).toBe('api-key');
    expect([...caller.scopes]).toEqual(['documents:validate', 'plans:read']);
    expect(caller.rateLimit).toEqual({ limit: 600, windowSeconds: 60 });
    expect(registry.originsOf('checkout-web')).toEqual(['https://checkout.internal.example']);
    expect([...registry.allOrigins()]).toEqual(['https://checkout.internal.example']);
    expect(registry.findById('mobile-backend')?.origins).toEqual([]);
    expect(registry.size).toBe(2);
  });

  test('the final comparison of a found hash is constant time (crypto.timingSafeEqual)', () => {
    // The real module object (an `import * as` namespace would be a copy).
    const spy = jest.spyOn(
      jest.requireActual<typeof import('node:crypto')>('node:crypto'),
      'timingSafeEqual',
    );
    registry.findByApiKey('mobile-key');
    expect(spy).toHaveBeenCalledTimes(1);
    spy.mockRestore();
  });
});

describe('client registry reload', () => {
  test('an invalid file at start throws', () => {
    const { file } = tempFile(registryText([{ ...mobile, scopes: ['not a scope'] }]));
    expect(() => loadClientRegistry(file, { logger: memoryLogger(), watch: false })).toThrow(
      ClientRegistryError,
    );
  });

  test('a missing file at start throws', () => {
    expect(() =>
      loadClientRegistry('/nonexistent/clients.json', { logger: memoryLogger(), watch: false }),
    ).toThrow();
  });

  test('a change of the file is picked up without a restart', async () => {
    const { dir, file } = tempFile(registryText([mobile]));
    const logger = memoryLogger();
    const registry = loadClientRegistry(file, { logger, watch: true, pollIntervalMs: 100 });
    try {
      expect(registry.findByApiKey('old-key')).toBeUndefined();
      writeFileSync(join(dir, 'next.json'), registryText([mobile, checkout]));
      renameSync(join(dir, 'next.json'), file);
      await waitFor(() => registry.findByApiKey('old-key')?.id === 'checkout-web', { what: 'reload' });
      expect(logger.lines.some((line) => line.message === 'client registry reloaded')).toBe(true);
    } finally {
      registry.close();
    }
  });

  test('a broken new version keeps the previous registry and logs an error', async () => {
    const { file } = tempFile(registryText([mobile]));
    const logger = memoryLogger();
    const registry = loadClientRegistry(file, { logger, watch: true, pollIntervalMs: 100 });
    try {
      writeFileSync(file, registryText([{ ...mobile, keys: ['leaked-plain-key'] }]));
      await waitFor(() => logger.lines.some((line) => line.level === 'error'), { what: 'refusal' });
      expect(registry.findByApiKey('mobile-key')?.id).toBe('mobile-backend');
      expect(JSON.stringify(logger.lines)).not.toContain('leaked-plain-key');
      expect(registry.reload()).toBe(false);
    } finally {
      registry.close();
    }
  });

  test('a Kubernetes-style ConfigMap symlink swap is picked up', async () => {
    const dir = tempDir('bff-configmap-');
    const version = (name: string, content: string) => {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, 'clients.json'), content);
    };
    version('v1', registryText([mobile]));
    symlinkSync('v1', join(dir, '..data'));
    symlinkSync('..data/clients.json', join(dir, 'clients.json'));
    const registry = loadClientRegistry(join(dir, 'clients.json'), {
      logger: memoryLogger(),
      watch: true,
      pollIntervalMs: 100,
    });
    try {
      version('v2', registryText([checkout]));
      symlinkSync('v2', join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      rmSync(join(dir, 'v1'), { recursive: true });
      await waitFor(() => registry.findByApiKey('new-key') !== undefined, { what: 'symlink swap' });
      expect(registry.findByApiKey('mobile-key')).toBeUndefined();
    } finally {
      registry.close();
    }
  });
});

describe('client registry staleness (a failed reload is loud)', () => {
  function fakeMetrics() {
    const failures: string[] = [];
    let staleSince = -1;
    return {
      failures,
      staleSince: () => staleSince,
      metrics: {
        registryReloadFailures: { inc: ({ reason }: { reason: string }) => failures.push(reason) },
        registryStaleSince: {
          set: (value: number) => {
            staleSince = value;
          },
        },
      },
    };
  }

  test('stale from the first failure until the file matches again; counted per refused version', () => {
    const { file } = tempFile(registryText([mobile, checkout]));
    const logger = memoryLogger();
    const observed = fakeMetrics();
    let now = 1_800_000_000_000;
    const registry = loadClientRegistry(file, {
      logger,
      watch: false,
      metrics: observed.metrics,
      now: () => now,
    });
    expect(registry.health()).toEqual({});
    expect(observed.staleSince()).toBe(0);

    // Revoking checkout-web's keys, with a typo: refused, so the revoked keys still work.
    writeFileSync(file, registryText([{ ...mobile, keys: ['typo'] }]));
    expect(registry.reload()).toBe(false);
    expect(registry.health()).toEqual({ staleSince: now, lastFailure: 'invalid' });
    expect(registry.findByApiKey('old-key')?.id).toBe('checkout-web');
    expect(observed.failures).toEqual(['invalid']);
    expect(observed.staleSince()).toBe(now / 1000);
    const refusal = logger.lines.find((line) => line.level === 'error');
    expect(refusal?.fields).toMatchObject({ reason: 'invalid', staleSince: new Date(now).toISOString() });
    expect(refusal?.message).toMatch(/keys removed from the file still work until it is fixed/);

    // The same broken content again (SIGHUP, another event): no new count, no new log line, same start.
    const firstFailure = now;
    now += 60_000;
    expect(registry.reload()).toBe(false);
    expect(observed.failures).toEqual(['invalid']);
    expect(logger.lines.filter((line) => line.level === 'error')).toHaveLength(1);

    // Another broken version, then the file gone: counted, but stale since the first failure.
    writeFileSync(file, '{"clients": [');
    expect(registry.reload()).toBe(false);
    unlinkSync(file);
    expect(registry.reload()).toBe(false);
    expect(observed.failures).toEqual(['invalid', 'invalid', 'unreadable']);
    expect(registry.health()).toEqual({ staleSince: firstFailure, lastFailure: 'unreadable' });
    expect(observed.staleSince()).toBe(firstFailure / 1000);

    // Fixed: current again, the revoked keys refused.
    writeFileSync(file, registryText([mobile]));
    expect(registry.reload()).toBe(true);
    expect(registry.health()).toEqual({});
    expect(observed.staleSince()).toBe(0);
    expect(registry.findByApiKey('old-key')).toBeUndefined();
    expect(logger.lines.at(-1)?.message).toBe('client registry matches the file again');
  });

  test('a file restored to the content in use clears the staleness too', () => {
    const original = registryText([mobile]);
    const { file } = tempFile(original);
    const observed = fakeMetrics();
    const registry = loadClientRegistry(file, {
      logger: memoryLogger(),
      watch: false,
      metrics: observed.metrics,
    });
    writeFileSync(file, 'not json');
    expect(registry.reload()).toBe(false);
    expect(registry.health().staleSince).toEqual(expect.any(Number));
    writeFileSync(file, original);
    expect(registry.reload()).toBe(true);
    expect(registry.health()).toEqual({});
    expect(observed.staleSince()).toBe(0);
    // The refused version is forgotten: written again, it is refused (and counted) again.
    writeFileSync(file, 'not json');
    expect(registry.reload()).toBe(false);
    expect(observed.failures).toEqual(['invalid', 'invalid']);
  });
});

describe('the development key in production', () => {
  const devEntry = { id: 'ops-shortcut', keys: [hash('local-dev-key')], scopes: ['plans:read'] };

  test('is refused at load in any registry, naming the client and the fix but no key', () => {
    const { file } = tempFile(registryText([mobile, devEntry]));
    let message = '';
    try {
      loadClientRegistry(file, { logger: memoryLogger(), watch: false, refuseDevelopmentKey: true });
    } catch (error) {
      expect(error).toBeInstanceOf(ClientRegistryError);
      message = (error as Error).message;
    }
    expect(message).toMatch(/client "ops-shortcut" keys\[0\] is the public development key/);
    expect(message).toMatch(/npm run client-key/);
    expect(message).not.toContain('local-dev-key');
    expect(message).not.toContain(hash('local-dev-key').slice(7));
    // The shipped development registry is refused the same way; outside production it loads.
    const local = join(__dirname, '..', '..', '..', 'config', 'clients.local.json');
    expect(() =>
      loadClientRegistry(local, { logger: memoryLogger(), watch: false, refuseDevelopmentKey: true }),
    ).toThrow(/development key/);
    const accepted = loadClientRegistry(file, { logger: memoryLogger(), watch: false });
    expect(accepted.findByApiKey('local-dev-key')?.id).toBe('ops-shortcut');
  });

  test('is refused on reload too: the previous registry keeps serving', async () => {
    const { file } = tempFile(registryText([mobile]));
    const logger = memoryLogger();
    const registry = loadClientRegistry(file, {
      logger,
      watch: true,
      pollIntervalMs: 100,
      refuseDevelopmentKey: true,
    });
    try {
      writeFileSync(file, registryText([mobile, devEntry]));
      expect(registry.reload()).toBe(false);
      expect(registry.findByApiKey('local-dev-key')).toBeUndefined();
      expect(registry.findByApiKey('mobile-key')?.id).toBe('mobile-backend');
      const refusal = logger.lines.find((line) => line.level === 'error');
      expect(JSON.stringify(refusal)).toMatch(/development key/);
    } finally {
      registry.close();
    }
  });
});

describe('the accounts a client may use', () => {
  const several = () => new Set(['sandbox', 'production']);
  const parse = (clients: unknown[], configuredAccounts?: () => ReadonlySet<string>) =>
    parseClientRegistry(registryText(clients), 'clients.json', { configuredAccounts });

  test("an entry's accounts reach its caller, the default first", () => {
    const snapshot = parse([{ ...mobile, accounts: ['production', 'sandbox'] }], several);
    expect(snapshot.byId.get('mobile-backend')?.accounts).toEqual(['production', 'sandbox']);
  });

  test('with several accounts configured, an entry without accounts is an error naming the client', () => {
    expect(() => parse([{ ...checkout, accounts: ['sandbox'] }, mobile], several)).toThrow(
      'client "mobile-backend" lists no "accounts" while several provider accounts are configured (sandbox, production)',
    );
    // With one account (or none known) the entry may leave it out.
    expect(parse([mobile], () => new Set(['default'])).byId.get('mobile-backend')?.accounts).toBeUndefined();
    expect(parse([mobile]).byId.size).toBe(1);
  });

  test('malformed, empty and repeated account lists are refused', () => {
    for (const accounts of [['Production'], [], ['sandbox', 'sandbox'], ['a'.repeat(65)]])
      expect(() => parse([{ ...mobile, accounts }], several)).toThrow('client "mobile-backend"');
  });

  test('an account not (yet) configured is accepted: the file and the registry can roll out in either order', () => {
    expect(parse([{ ...mobile, accounts: ['merchant-br'] }], several).byId.size).toBe(1);
  });
});

describe('SSO clients: entries with neither keys nor session', () => {
  const sso = { id: 'reports-service', scopes: ['plans:read'], accounts: ['sandbox'], priority: 'sheddable' };

  test('are refused while no SSO is configured: such an entry could never be used', () => {
    expect(() => parseClientRegistry(registryText([sso]), 'clients.json')).toThrow(
      'client "reports-service" (clients[0]) keys: must list at least one key hash (or be a session web app, or an SSO client while OIDC_ISSUER is set)',
    );
  });

  test('are loaded with SSO on: the entry lends its accounts, priority and quota to its tokens, and takes no key', () => {
    const snapshot = parseClientRegistry(registryText([{ ...sso, quota: { day: 10 } }]), 'clients.json', {
      ssoClients: true,
    });
    const caller = snapshot.byId.get('reports-service');
    expect(caller?.accounts).toEqual(['sandbox']);
    expect(caller?.priority).toBe('sheddable');
    expect(caller?.quota).toEqual({ day: 10, month: undefined, timeZone: 'UTC' });
    expect(snapshot.byHash.size).toBe(0);
  });

  test('are counted, so the registry says whether it names the SSO clients (issue 42)', () => {
    expect(parseClientRegistry(registryText([sso]), 'clients.json', { ssoClients: true }).ssoClients).toBe(1);
    expect(parseClientRegistry(registryText([mobile]), 'clients.json', { ssoClients: true }).ssoClients).toBe(
      0,
    );
  });
});
