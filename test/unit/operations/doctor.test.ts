// The doctor's verdicts: every failure mode told apart, the right fix, and nothing secret in the report.
import { ConfigError } from '../../../src/config/config-error';
import type { GatewayConfig } from '../../../src/config/gateway-config';
import {
  diagnoseStore,
  diagnoseToken,
  formatReport,
  isPrivateAddress,
  runDoctor,
  type TokenAttempt,
} from '../../../src/operations/doctor';

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

describe('runDoctor', () => {
  const config = {
    mode: 'upstream',
    production: true,
    redis: { topology: { kind: 'standalone', url: 'redis://r:6379' } },
  } as unknown as GatewayConfig;

  test('all pass: ok, exit-worthy report', async () => {
    const report = await runDoctor({
      loadConfig: () => config,
      checkStore: async () => ({ kind: 'redis', where: 'Redis at r:6379', ok: true, latencyMs: 1 }),
      requestToken: async () => answer(200, { tokenIssued: true }),
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
      checkStore: jest.fn(),
      requestToken,
    });
    expect(report.ok).toBe(false);
    const text = formatReport(report);
    expect(text).toContain('✗ configuration: invalid: UPSTREAM_PASSWORD is required');
    expect(text).toContain('- upstream token request');
    expect(requestToken).not.toHaveBeenCalled();
  });

  test('one failing step fails the whole report', async () => {
    const report = await runDoctor({
      loadConfig: () => config,
      checkStore: async () => ({ kind: 'memory', reason: 'x' }),
      requestToken: async () => answer(401),
    });
    expect(report.ok).toBe(false);
    expect(formatReport(report)).toMatch(/✗ upstream token request[^\n]*\n {4}fix: /);
  });
});
