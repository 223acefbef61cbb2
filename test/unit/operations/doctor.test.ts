// The doctor's verdicts: every failure mode told apart, the right fix, and nothing secret in the report.
import { ConfigError } from '../../../src/config/config-error';
import type { GatewayConfig } from '../../../src/config/gateway-config';
import {
  type ClientsCheck,
  diagnoseClients,
  diagnoseStore,
  diagnoseToken,
  formatReport,
  isPrivateAddress,
  runDoctor,
  type TokenAttempt,
} from '../../../src/operations/doctor';
import { accountSpec, fakeAccounts, oneAccount } from './doctor-fakes';

const target = 'https://api.payments.example';
const answer = (
  status: number,
  extra: Partial<Extract<TokenAttempt, { kind: 'answer' }>> = {},
): TokenAttempt => ({
  kind: 'answer',
  target,
  status,
  tokenIssued: false,
  ...extra,
});
const failure = (code: string | undefined, timedOut = false): TokenAttempt => ({
  kind: 'error',
  target,
  code,
  timedOut,
  timeoutMs: 10_000,
});

describe('diagnoseToken', () => {
  test('200 with a token pair passes', () => {
    const step = diagnoseToken(answer(200, { tokenIssued: true, accessLifetimeSeconds: 300 }));
    expect(step.state).toBe('pass');
    expect(step.detail).toContain('300 s');
  });

  test('200 without a token pair fails', () => {
    expect(diagnoseToken(answer(200)).state).toBe('fail');
  });

  test.each([401, 400])('%i is bad credentials, named by variable', (status) => {
    const step = diagnoseToken(answer(status));
    expect(step.detail).toContain('bad credentials');
    expect(step.detail).toContain('UPSTREAM_USERNAME/UPSTREAM_PASSWORD');
  });

  test('403 with a private local address: whitelist, and the NAT caveat', () => {
    const step = diagnoseToken(answer(403, { localAddress: '10.0.3.7' }));
    expect(step.detail).toContain('IP not whitelisted');
    expect(step.fix).toContain('10.0.3.7');
    expect(step.fix).toContain('NAT');
  });

  test('403 with a public local address: that address is the one to whitelist', () => {
    expect(diagnoseToken(answer(403, { localAddress: '203.0.113.9' })).fix).toContain(
      'whitelist 203.0.113.9',
    );
  });

  test.each([
    ['ENOTFOUND', 'DNS failure'],
    ['EAI_AGAIN', 'DNS failure'],
    ['ECONNREFUSED', 'connection refused'],
    ['CERT_HAS_EXPIRED', 'TLS failure'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'TLS failure'],
    ['SELF_SIGNED_CERT_IN_CHAIN', 'TLS failure'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'TLS failure'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'TLS failure'],
    ['ETIMEDOUT', 'timeout'],
    ['ECONNRESET', 'closed the connection'],
    ['EHOSTUNREACH', 'no route'],
  ])('%s → %s', (code, words) => {
    const step = diagnoseToken(failure(code));
    expect(step.state).toBe('fail');
    expect(step.detail).toContain(words);
    expect(step.fix).toBeTruthy();
  });

  test.each([
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', /set UPSTREAM_CA_FILE to the provider's CA/],
    ['SELF_SIGNED_CERT_IN_CHAIN', /set UPSTREAM_CA_FILE/],
    ['CERT_HAS_EXPIRED', /the provider's certificate expired/],
    ['ERR_TLS_CERT_ALTNAME_INVALID', /UPSTREAM_BASE_URL host does not match the certificate/],
  ])('TLS %s gets its own fix', (code, fix) => {
    const step = diagnoseToken(failure(code));
    expect(step.detail).toContain(code);
    expect(step.fix).toMatch(fix);
    expect(step.fix).toMatch(/^(?!.*NODE_TLS_REJECT_UNAUTHORIZED)/);
  });

  test('our own timeout is a timeout whatever the code', () => {
    expect(diagnoseToken(failure(undefined, true)).detail).toContain('did not answer within 10000 ms');
  });

  test.each([
    [404, '/api/token/'],
    [429, 'rate limiting'],
    [503, 'HTTP 503'],
  ])('%i is named', (status, words) => {
    expect(diagnoseToken(answer(status)).detail).toContain(words);
  });
});

describe('diagnoseStore', () => {
  test('memory store passes and says why', () => {
    expect(diagnoseStore({ kind: 'memory', reason: 'local mode' })).toMatchObject({ state: 'pass' });
  });
  test('a refused password points at REDIS_PASSWORD', () => {
    const step = diagnoseStore({
      kind: 'redis',
      where: 'Redis at r:6379',
      ok: false,
      problem: 'WRONGPASS invalid',
    });
    expect(step.fix).toContain('REDIS_PASSWORD');
  });
});

test('isPrivateAddress', () => {
  for (const ip of [
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '127.0.0.1',
    '::1',
    'fd00::1',
    '::ffff:10.0.0.1',
  ])
    expect(isPrivateAddress(ip)).toBe(true);
  for (const ip of ['8.8.8.8', '172.32.0.1', '203.0.113.9', '2001:db8::1'])
    expect(isPrivateAddress(ip)).toBe(false);
});

describe('diagnoseClients', () => {
  const file = '/app/config/clients.json';

  test('a registry with clients passes and says how many', () => {
    expect(diagnoseClients({ kind: 'loaded', file, clients: 2 }, false)).toMatchObject({
      state: 'pass',
      detail: `${file}: 2 clients`,
    });
  });

  test('a missing file fails: the gateway would not start; the fix names CLIENTS_FILE', () => {
    const step = diagnoseClients({ kind: 'unreadable', file, code: 'ENOENT' }, false);
    expect(step.state).toBe('fail');
    expect(step.detail).toContain(`${file} cannot be read (ENOENT)`);
    expect(step.detail).toContain('refuses to start');
    expect(step.fix).toContain('CLIENTS_FILE');
  });

  test('an unreadable file (permissions) fails with a permission fix', () => {
    const step = diagnoseClients({ kind: 'unreadable', file, code: 'EACCES' }, false);
    expect(step.state).toBe('fail');
    expect(step.fix).toContain('can read');
  });

  test('an invalid entry fails with every reason the schema gave', () => {
    const step = diagnoseClients(
      {
        kind: 'invalid',
        file,
        problems: [
          'client "web" (clients[0]) keys[0]: must be "sha256:" …',
          'client "web" appears more than once',
        ],
      },
      false,
    );
    expect(step.state).toBe('fail');
    expect(step.detail).toContain('client "web" (clients[0]) keys[0]');
    expect(step.detail).toContain('appears more than once');
  });

  test('an empty registry is a warning that nobody is let in (and SSO callers still are when OIDC is on)', () => {
    const empty: ClientsCheck = { kind: 'loaded', file, clients: 0 };
    const withoutOidc = diagnoseClients(empty, false);
    expect(withoutOidc.state).toBe('warn');
    expect(withoutOidc.detail).toContain('nobody is let in');
    expect(withoutOidc.fix).toContain('npm run client-key');
    expect(diagnoseClients(empty, true).detail).toContain('SSO bearer tokens still are');
  });
});

describe('runDoctor', () => {
  const config = {
    mode: 'upstream',
    production: true,
    redis: { topology: { kind: 'standalone', url: 'redis://r:6379' } },
    callers: { clientsFile: '/app/config/clients.json' },
  } as unknown as GatewayConfig;
  const registry = (clients: number) => (): ClientsCheck => ({
    kind: 'loaded',
    file: '/app/config/clients.json',
    clients,
  });

  test('all pass: ok, exit-worthy report', async () => {
    const report = await runDoctor({
      loadConfig: () => config,
      checkClients: registry(1),
      checkStore: async () => ({ kind: 'redis', where: 'Redis at r:6379', ok: true, latencyMs: 1 }),
      ...oneAccount(answer(200, { tokenIssued: true })),
    });
    expect(report.ok).toBe(true);
    expect(formatReport(report)).toContain('All checks passed.');
  });

  test('a config error names the variables and skips the rest', async () => {
    const requestToken = jest.fn();
    const report = await runDoctor({
      loadConfig: () => {
        throw new ConfigError([{ variable: 'UPSTREAM_PASSWORD', message: 'is required' }]);
      },
      checkClients: jest.fn(),
      checkStore: jest.fn(),
      listAccounts: requestToken,
      probeAccount: requestToken,
    });
    expect(report.ok).toBe(false);
    const text = formatReport(report);
    expect(text).toContain('✗ configuration: invalid: UPSTREAM_PASSWORD is required');
    expect(text).toContain('- client registry: needs a valid configuration');
    expect(text).toContain('- upstream token request');
    expect(requestToken).not.toHaveBeenCalled();
  });

  test('one failing step fails the whole report', async () => {
    const report = await runDoctor({
      loadConfig: () => config,
      checkClients: registry(1),
      checkStore: async () => ({ kind: 'memory', reason: 'x' }),
      ...oneAccount(answer(401)),
    });
    expect(report.ok).toBe(false);
    expect(formatReport(report)).toMatch(/✗ upstream token request[^\n]*\n {4}fix: /);
  });

  test('an invalid registry fails the report even when everything else passes', async () => {
    const report = await runDoctor({
      loadConfig: () => config,
      checkClients: () => ({ kind: 'invalid', file: '/x.json', problems: ['is not valid JSON'] }),
      checkStore: async () => ({ kind: 'memory', reason: 'x' }),
      ...oneAccount(answer(200, { tokenIssued: true })),
    });
    expect(report.ok).toBe(false);
    expect(formatReport(report)).toContain('1 check did not pass.');
  });

  test('an empty registry warns but does not fail: the verdict counts the warning', async () => {
    const report = await runDoctor({
      loadConfig: () => config,
      checkClients: registry(0),
      checkStore: async () => ({ kind: 'memory', reason: 'x' }),
      ...oneAccount(answer(200, { tokenIssued: true })),
    });
    expect(report.ok).toBe(true);
    const text = formatReport(report);
    expect(text).toMatch(/^! client registry: [^\n]*nobody is let in/m);
    expect(text).toContain('No check failed; 1 warning above.');
    expect(text).not.toContain('All checks passed.');
  });
});

describe('runDoctor per provider account, and the fleet back-off', () => {
  const config = {
    mode: 'upstream',
    production: true,
    redis: { topology: { kind: 'standalone', url: 'redis://r:6379' } },
    callers: { clientsFile: '/app/config/clients.json' },
  } as unknown as GatewayConfig;
  const base = {
    loadConfig: () => config,
    checkClients: (): ClientsCheck => ({ kind: 'loaded', file: '/c.json', clients: 1 }),
    checkStore: async () => ({
      kind: 'redis' as const,
      where: 'Redis at r:6379',
      ok: true as const,
      latencyMs: 1,
    }),
  };
  const issued = answer(200, { tokenIssued: true });
  const refusedRecord = (reason: string, streak = 3) => ({
    reason,
    at: Date.parse('2026-11-25T14:00:00Z'),
    waitMs: 80_000,
    streak,
    credentials: 'fp',
  });
  const backingOff = (reason: string, remainingMs = 754_000) =>
    ({ kind: 'backing-off', cause: 'refusal', remainingMs, record: refusedRecord(reason) }) as const;

  test('every account line names its account; a backing-off account is not logged in, the other is', async () => {
    const fake = fakeAccounts(
      { account: accountSpec('sandbox'), attempt: answer(401), backoff: backingOff('UPSTREAM_AUTH_FAILED') },
      { account: accountSpec('production-br'), attempt: issued },
    );
    const report = await runDoctor({ ...base, ...fake.deps });
    const text = formatReport(report);
    expect(fake.logins).toEqual(['production-br']);
    expect(report.ok).toBe(false);
    expect(text).toContain(
      '✗ login back-off (account sandbox): the fleet is backing off, 12 min 34 s left; last failure: 401, the provider refused the credentials, 3 in a row, at 2026-11-25T14:00:00.000Z',
    );
    expect(text).toContain(
      '- upstream token request (account sandbox): not attempted while the fleet backs off',
    );
    expect(text).toContain('--force-login');
    expect(text).toContain('✓ login back-off (account production-br): none: the fleet would log in now');
    expect(text).toContain('✓ upstream token request (account production-br)');
    expect(fake.closed).toEqual(['sandbox', 'production-br']);
  });

  test('--force-login logs in once during the back-off, and a refusal it meets is shared with the fleet', async () => {
    const fake = fakeAccounts({
      account: accountSpec('sandbox'),
      attempt: answer(401),
      backoff: backingOff('UPSTREAM_AUTH_FAILED'),
    });
    const text = formatReport(await runDoctor({ ...base, ...fake.deps, forceLogin: true }));
    expect(fake.logins).toEqual(['sandbox']);
    expect(fake.shared).toEqual(['sandbox:UPSTREAM_AUTH_FAILED']);
    expect(text).toContain('logging in once anyway (--force-login)');
    expect(text).toContain(
      '✗ upstream token request (account sandbox): bad credentials: the provider refused the usernameFile/passwordFile of account sandbox (HTTP 401); shared with the fleet: no replica (nor the next doctor run) logs in for 20 s',
    );
    // The fix names where this account's credentials live, not the single-account variables.
    expect(text).toContain(
      'check the files named by the usernameFile and passwordFile of account sandbox in UPSTREAM_ACCOUNTS_FILE',
    );
    expect(text).not.toContain('UPSTREAM_USERNAME');
  });

  test('a 403 back-off names the account and its localAddress, or the host default address', async () => {
    const fake = fakeAccounts(
      {
        account: accountSpec('production-ar', '10.20.0.12'),
        attempt: issued,
        backoff: backingOff('UPSTREAM_IP_NOT_WHITELISTED'),
      },
      {
        account: accountSpec('production-br'),
        attempt: issued,
        backoff: backingOff('UPSTREAM_IP_NOT_WHITELISTED'),
      },
    );
    const text = formatReport(await runDoctor({ ...base, ...fake.deps }));
    expect(text).toContain(
      '403, the provider refused the IP address (account production-ar sends from 10.20.0.12 (its localAddress))',
    );
    expect(text).toContain('whitelist 10.20.0.12 for account production-ar');
    expect(text).toContain(
      "403, the provider refused the IP address (account production-br sends from the host's default address)",
    );
    expect(fake.logins).toEqual([]);
  });

  test('a 403 answer to the doctor names the account and the address it left from; the refusal is shared', async () => {
    const fake = fakeAccounts({
      account: accountSpec('production-ar', '203.0.113.7'),
      attempt: answer(403, { localAddress: '203.0.113.7' }),
    });
    const text = formatReport(await runDoctor({ ...base, ...fake.deps }));
    expect(text).toContain(
      '✗ upstream token request (account production-ar): IP not whitelisted: the provider refused account production-ar, sent from 203.0.113.7 (its localAddress) (HTTP 403)',
    );
    expect(text).toContain('whitelist 203.0.113.7');
    expect(fake.shared).toEqual(['production-ar:UPSTREAM_IP_NOT_WHITELISTED']);
  });

  test('a 403 without localAddress says the host default address (and the socket address seen)', () => {
    const step = diagnoseToken(answer(403, { localAddress: '10.0.3.7' }), { id: 'sandbox' });
    expect(step.detail).toContain("sent from the host's default address, 10.0.3.7 on this socket");
  });

  test('an address the host does not hold: named with its account', () => {
    const step = diagnoseToken(failure('EADDRNOTAVAIL'), { id: 'production-ar', localAddress: '10.20.0.99' });
    expect(step.detail).toContain(
      'this host does not hold 10.20.0.99, the localAddress of account production-ar',
    );
  });

  test('a back-off that cannot be read (store down): no login unless forced', async () => {
    const unknown = { kind: 'unknown' } as const;
    const quiet = fakeAccounts({ account: accountSpec('default'), attempt: issued, backoff: unknown });
    const text = formatReport(await runDoctor({ ...base, ...quiet.deps }));
    expect(quiet.logins).toEqual([]);
    expect(text).toContain('! login back-off (account default): cannot be read');
    const forced = fakeAccounts({ account: accountSpec('default'), attempt: issued, backoff: unknown });
    await runDoctor({ ...base, ...forced.deps, forceLogin: true });
    expect(forced.logins).toEqual(['default']);
  });

  test('a transient back-off: no login, and the fix says the provider is failing', async () => {
    const fake = fakeAccounts({
      account: accountSpec('default'),
      attempt: issued,
      backoff: {
        kind: 'backing-off',
        cause: 'transient',
        remainingMs: 4_000,
        record: refusedRecord('UPSTREAM_TIMEOUT', 1),
      },
    });
    const text = formatReport(await runDoctor({ ...base, ...fake.deps }));
    expect(fake.logins).toEqual([]);
    expect(text).toContain('4 s left; last failure: a timeout of the token endpoint');
    expect(text).toContain("the provider's token endpoint is failing");
  });

  test('an invalid accounts file fails the doctor with a clear line, and no account is probed', async () => {
    const probeAccount = jest.fn();
    const report = await runDoctor({
      ...base,
      listAccounts: async () => {
        throw new ConfigError([
          { variable: 'UPSTREAM_ACCOUNTS_FILE', message: 'accounts[1].id "sandbox" appears more than once' },
        ]);
      },
      probeAccount,
    });
    expect(report.ok).toBe(false);
    expect(formatReport(report)).toContain(
      '✗ provider accounts: invalid: UPSTREAM_ACCOUNTS_FILE accounts[1].id "sandbox" appears more than once',
    );
    expect(probeAccount).not.toHaveBeenCalled();
  });
});
