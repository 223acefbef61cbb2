import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accountsJsonSchema, readAccountsFile } from '../../../src/config/accounts-file';
import { ConfigError } from '../../../src/config/config-error';
import { loadConfig } from '../../../src/config/load-config';
import { tempDir } from '../../support/temp-dir';
import { createTestPki } from '../../support/test-certificates';

const dir = tempDir('bff-accounts-file-');
const file = join(dir, 'accounts.json');
const secret = (name: string) => {
  const path = join(dir, name);
  writeFileSync(path, 'value');
  return path;
};
const account = (id: string, extra: object = {}) => ({
  id,
  baseUrl: `https://${id}.payments.example.com/`,
  usernameFile: secret(`${id}-username`),
  passwordFile: secret(`${id}-password`),
  ...extra,
});
const options = (overrides: object = {}) => ({
  file,
  production: true,
  allowHttp: false,
  defaults: { maxSockets: 64, timeoutMs: 5_000 },
  ...overrides,
});
const read = (content: unknown, overrides: object = {}) => {
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return readAccountsFile(options(overrides));
};
/** The problems of a refused file, one line each. */
const problems = async (content: unknown, overrides: object = {}): Promise<string[]> => {
  try {
    await read(content, overrides);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems.map((p) => `${p.variable}: ${p.message}`);
  }
  throw new Error('the file was accepted');
};

describe('UPSTREAM_ACCOUNTS_FILE', () => {
  test('gives each account its spec: canonical base URL, credential paths, defaults from the global variables', async () => {
    const specs = await read({
      accounts: [
        account('sandbox'),
        account('merchant-br', {
          staticHeaders: { 'X-Version': 'LPV3' },
          maxSockets: 8,
          timeoutMs: 900,
          localAddress: '127.0.0.2',
        }),
      ],
    });
    expect(specs.map((s) => s.id)).toEqual(['sandbox', 'merchant-br']);
    expect(specs[0]).toEqual({
      id: 'sandbox',
      baseUrl: 'https://sandbox.payments.example.com',
      credentials: {
        usernameFile: join(dir, 'sandbox-username'),
        passwordFile: join(dir, 'sandbox-password'),
      },
      staticHeaders: {},
      maxSockets: 64,
      timeoutMs: 5_000,
    });
    expect(specs[1]).toMatchObject({
      staticHeaders: { 'x-version': 'LPV3' },
      maxSockets: 8,
      timeoutMs: 900,
      localAddress: '127.0.0.2',
    });
  });

  test('carries a budget for the budget module, defaults filled in by the one budget schema, and refuses a malformed one', async () => {
    const budget = { requestsPerSecond: 50, burst: 100, shares: { sheddable: 0.5, critical: 1 } };
    // The shares not given take their defaults here (src/config/budget-schema.ts), not in the account.
    expect((await read({ accounts: [account('sandbox', { budget })] }))[0]?.budget).toEqual({
      ...budget,
      shares: { sheddable: 0.5, standard: 0.8, critical: 1 },
    });
    // burst may be left out: a twentieth of a second of budget, at least one call.
    expect(
      (await read({ accounts: [account('sandbox', { budget: { requestsPerSecond: 50 } })] }))[0]?.budget,
    ).toEqual({ requestsPerSecond: 50, burst: 3, shares: { sheddable: 0.5, standard: 0.8, critical: 1 } });
    const refused = await problems({
      accounts: [account('sandbox', { budget: { requestsPerSecond: 0, burst: 1, shares: { standard: 2 } } })],
    });
    expect(refused).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) budget.requestsPerSecond: must be above 0 (to stop calling an account, remove it from the file)',
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) budget.requestsPerSecond: must be at least 0.01',
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) budget.shares.standard: must be at most 1 (the whole budget)',
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) budget.shares: must keep sheddable <= standard <= critical (a lower priority never gets more than a higher one)',
    ]);
  });

  test('carries a billable set, and refuses hostile ones with a clear error naming the account and entry', async () => {
    const billable = ['2xx', '404', '!204'];
    expect((await read({ accounts: [account('sandbox', { billable })] }))[0]?.billable).toEqual(billable);
    expect((await read({ accounts: [account('sandbox')] }))[0]?.billable).toBeUndefined();
    const refusedWith = (value: unknown) => problems({ accounts: [account('sandbox', { billable: value })] });
    expect(await refusedWith(['2xx', '6xx', '1xx', 'abc', '!'])).toEqual(
      [1, 2, 3, 4].map(
        (i) =>
          `UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) billable: [${i}] must be a status class ("2xx".."5xx") or code ("404"), optionally preceded by "!" to exclude it`,
      ),
    );
    expect(await refusedWith(['!401', '!403'])).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) billable: must include at least one class or code (only exclusions bill nothing)',
    ]);
    expect(await refusedWith(['2xx', '2xx'])).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) billable: [1] "2xx" appears twice',
    ]);
    for (const hostile of [
      [],
      '2xx',
      { statuses: ['2xx'] },
      [200],
      [null],
      ['2xx\n'],
      Array(33).fill('2xx'),
      ['2xx'.repeat(40)],
    ])
      expect((await refusedWith(hostile)).join('\n')).toMatch(/account "sandbox" \(accounts\[0\]\) billable/);
  });

  test('reads caFile as PEM certificates, and refuses one that holds none', async () => {
    const ca = join(dir, 'ca.pem');
    writeFileSync(ca, (await createTestPki()).caPem);
    const [spec] = await read({ accounts: [account('sandbox', { caFile: ca })] });
    expect(spec?.extraCa).toHaveLength(1);
    writeFileSync(ca, 'not a certificate');
    expect(await problems({ accounts: [account('sandbox', { caFile: ca })] })).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) caFile: holds no valid PEM certificate (-----BEGIN CERTIFICATE-----)',
    ]);
  });

  test('refuses duplicate ids, naming the account', async () => {
    expect(await problems({ accounts: [account('sandbox'), account('sandbox')] })).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[1]) id: appears more than once (each account has its own id)',
    ]);
  });

  test('refuses unknown fields and malformed ids', async () => {
    const refused = await problems({ accounts: [account('sandbox', { region: 'br' }), account('Prod_1')] });
    expect(refused).toHaveLength(2);
    expect(refused[0]).toMatch(
      /^UPSTREAM_ACCOUNTS_FILE: account "sandbox" \(accounts\[0\]\): Unrecognized key.*region/,
    );
    expect(refused[1]).toBe(
      'UPSTREAM_ACCOUNTS_FILE: accounts[1] id: must be 1-64 lower-case letters, digits and dashes (not at either end)',
    );
  });

  test('refuses a secret written into the file, by its field, without echoing it', async () => {
    const refused = await problems({
      accounts: [
        account('sandbox', { password: 'hunter2-secret' }),
        account('production', { username: 'merchant' }),
      ],
    });
    expect(refused).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) password: a secret has no place in the accounts file; put it in a file of its own and give its absolute path as passwordFile',
      'UPSTREAM_ACCOUNTS_FILE: account "production" (accounts[1]) username: a secret has no place in the accounts file; put it in a file of its own and give its absolute path as usernameFile',
    ]);
    expect(refused.join('\n')).not.toContain('hunter2-secret');
  });

  test('refuses a user and password inside baseUrl without echoing them, and http in production', async () => {
    const refused = await problems({
      accounts: [
        account('sandbox', { baseUrl: 'https://merchant:hunter2@sandbox.example.com' }),
        account('production', { baseUrl: 'http://production.example.com' }),
        account('other', { baseUrl: 'not a url' }),
      ],
    });
    expect(refused).toEqual([
      expect.stringContaining(
        'account "sandbox" (accounts[0]) baseUrl: must be the provider\'s base URL only',
      ),
      'UPSTREAM_ACCOUNTS_FILE: account "production" (accounts[1]) baseUrl: must be https in production',
      'UPSTREAM_ACCOUNTS_FILE: account "other" (accounts[2]) baseUrl: must be an http(s) URL',
    ]);
    expect(refused.join('\n')).not.toContain('hunter2');
    const outside = await problems(
      { accounts: [account('production', { baseUrl: 'http://production.example.com' })] },
      { production: false },
    );
    expect(outside).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: account "production" (accounts[0]) baseUrl: must be https (set UPSTREAM_ALLOW_HTTP=true for tests)',
    ]);
    const allowed = await read(
      { accounts: [account('production', { baseUrl: 'http://production.example.com' })] },
      { production: false, allowHttp: true },
    );
    expect(allowed[0]?.baseUrl).toBe('http://production.example.com');
  });

  test('refuses relative paths and missing or unreadable files, naming the account and field', async () => {
    const unreadable = secret('unreadable');
    chmodSync(unreadable, 0o000);
    const relative = await problems({ accounts: [account('sandbox', { usernameFile: 'secrets/username' })] });
    expect(relative).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: account "sandbox" (accounts[0]) usernameFile: must be an absolute path (a relative one would depend on the working directory)',
    ]);
    const refused = await problems({
      accounts: [
        account('sandbox'),
        account('production', { passwordFile: join(dir, 'missing') }),
        account('other', { usernameFile: unreadable }),
      ],
    });
    expect(refused[0]).toBe(
      `UPSTREAM_ACCOUNTS_FILE: account "production" (accounts[1]) passwordFile: names a file that cannot be read (ENOENT): ${join(dir, 'missing')}`,
    );
    // Root reads any file: the unreadable one is refused only for an ordinary user.
    if (process.getuid?.() !== 0)
      expect(refused[1]).toContain(
        'account "other" (accounts[2]) usernameFile: names a file that cannot be read (EACCES)',
      );
  });

  test('refuses a file that is missing, not JSON or without accounts', async () => {
    expect(await problems('{ not json')).toEqual([`UPSTREAM_ACCOUNTS_FILE: ${file} is not valid JSON`]);
    expect(await problems({ accounts: [] })).toEqual([
      'UPSTREAM_ACCOUNTS_FILE: accounts: must list at least one account',
    ]);
    expect(await problems([1, 2])).toHaveLength(1);
    await expect(readAccountsFile(options({ file: join(dir, 'nowhere.json') }))).rejects.toThrow(
      /names a file that cannot be read \(ENOENT\)/,
    );
  });

  test('config/accounts.schema.json is the JSON Schema of the file, and the example is valid', async () => {
    const config = (name: string) => join(__dirname, '../../../config', name);
    expect(JSON.parse(readFileSync(config('accounts.schema.json'), 'utf8'))).toEqual(accountsJsonSchema());
    const example = JSON.parse(readFileSync(config('accounts.example.json'), 'utf8')) as {
      accounts: { usernameFile: string; passwordFile: string }[];
    };
    // The example's secret paths exist only in a deployment: point them at files of this test.
    for (const entry of example.accounts) {
      entry.usernameFile = secret('example-username');
      entry.passwordFile = secret('example-password');
    }
    expect((await read(example)).map((s) => s.id)).toEqual(['sandbox', 'merchant-br', 'merchant-ar']);
  });

  test('the file and the single-account variables at once are a configuration error naming each variable', () => {
    const env = {
      NODE_ENV: 'test',
      UPSTREAM_ACCOUNTS_FILE: file,
      UPSTREAM_BASE_URL: 'https://api.example.com',
      UPSTREAM_USERNAME: 'merchant',
      ALLOW_MEMORY_STORE: 'true',
    };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (error) {
      expect((error as ConfigError).problems.map((p) => p.variable)).toEqual([
        'UPSTREAM_BASE_URL',
        'UPSTREAM_USERNAME',
      ]);
    }
    const alone = loadConfig({ NODE_ENV: 'test', UPSTREAM_ACCOUNTS_FILE: file, ALLOW_MEMORY_STORE: 'true' });
    expect(alone.mode).toBe('upstream');
    expect(alone.upstream.accountsFile).toBe(file);
  });
});
