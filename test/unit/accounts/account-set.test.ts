import type { Account } from '../../../src/accounts/account';
import { createAccountSet } from '../../../src/accounts/account-set';
import type { AccountSpec, AccountSpecSource } from '../../../src/config/account-spec';
import { ConfigError } from '../../../src/config/config-error';
import { memoryLogger } from '../callers/support/test-app';

const spec = (id: string, baseUrl = `https://${id}.example.com`): AccountSpec => ({
  id,
  baseUrl,
  credentials: { usernameFile: `/run/${id}/username`, passwordFile: `/run/${id}/password` },
  staticHeaders: {},
  maxSockets: 8,
  timeoutMs: 1_000,
});

/** A source the test changes, and fake accounts that record their building and closing. */
function fixture(initial: AccountSpec[]) {
  let specs: AccountSpec[] | Error = initial;
  let changed: () => void = () => undefined;
  const source: AccountSpecSource = {
    read: async () => {
      if (specs instanceof Error) throw specs;
      return specs;
    },
    watch: (onChange) => {
      changed = onChange;
      return () => undefined;
    },
  };
  const events: string[] = [];
  const inFlight = new Map<string, number>();
  const failing = new Set<string>();
  const build = async (s: AccountSpec): Promise<Account> => {
    if (failing.has(s.id)) throw new Error(`cannot start ${s.id}`);
    events.push(`build ${s.id}`);
    return {
      id: s.id,
      spec: s,
      inFlight: () => inFlight.get(s.id) ?? 0,
      close: async () => {
        events.push(`close ${s.id}`);
      },
    } as unknown as Account;
  };
  const logger = memoryLogger();
  const counted: string[] = [];
  const metrics = {
    accountsReloadFailures: { inc: ({ reason }: { reason: string }) => counted.push(reason) },
    accountsStaleSince: { set: () => undefined },
  };
  return {
    events,
    inFlight,
    failing,
    logger,
    counted,
    change(next: AccountSpec[] | Error) {
      specs = next;
    },
    fileChanged: () => changed(),
    start: () => createAccountSet({ source, build, logger, metrics, drainMs: 2_000 }),
  };
}

describe('the account set', () => {
  test('builds every account of the source; get is a lookup by id', async () => {
    const f = fixture([spec('sandbox'), spec('production')]);
    const set = await f.start();
    expect(set.get('sandbox')?.id).toBe('sandbox');
    expect(set.get('nowhere')).toBeUndefined();
    expect([...set.ids()]).toEqual(['sandbox', 'production']);
    expect(set.soleId()).toBeUndefined();
    expect(f.events).toEqual(['build sandbox', 'build production']);
    await set.close();
  });

  test('a reload keeps unchanged accounts, builds new and changed ones, drains and closes replaced and removed ones', async () => {
    const f = fixture([spec('sandbox'), spec('production'), spec('old')]);
    const set = await f.start();
    const sandbox = set.get('sandbox');
    const production = set.get('production');
    const swapped: string[][] = [];
    set.onSwap((ids) => swapped.push([...ids]));
    f.inFlight.set('production', 1);
    f.events.length = 0;

    f.change([spec('sandbox'), spec('production', 'https://moved.example.com'), spec('new')]);
    expect(await set.reload()).toBe(true);

    expect(set.get('sandbox')).toBe(sandbox);
    expect(set.get('production')).not.toBe(production);
    expect(set.get('production')?.spec.baseUrl).toBe('https://moved.example.com');
    expect(set.get('old')).toBeUndefined();
    expect(swapped).toEqual([['sandbox', 'production', 'new']]);
    // The removed account closes at once; the replaced one waits for its call in flight.
    await new Promise((r) => setTimeout(r, 100));
    expect(f.events).toEqual(['build production', 'build new', 'close old']);
    f.inFlight.set('production', 0);
    await new Promise((r) => setTimeout(r, 100));
    expect(f.events).toContain('close production');
    await set.close();
  });

  test('an unchanged source builds nothing and closes nothing', async () => {
    const f = fixture([spec('sandbox')]);
    const set = await f.start();
    f.events.length = 0;
    expect(await set.reload()).toBe(true);
    expect(f.events).toEqual([]);
    expect(set.soleId()).toBe('sandbox');
    await set.close();
  });

  test('an invalid source keeps the last good set, logged and counted; a fixed one clears the state', async () => {
    const f = fixture([spec('sandbox')]);
    const set = await f.start();
    f.change(
      new ConfigError([
        { variable: 'UPSTREAM_ACCOUNTS_FILE', message: 'account "x" id: appears more than once' },
      ]),
    );
    expect(await set.reload()).toBe(false);
    expect(set.get('sandbox')).toBeDefined();
    expect(set.health()).toMatchObject({
      lastFailure: 'invalid',
      problem: expect.stringContaining('appears more than once'),
    });
    expect(f.counted).toEqual(['invalid']);
    expect(
      f.logger.lines.some((l) => l.level === 'error' && l.message.includes('keeping the last good set')),
    ).toBe(true);
    f.change([spec('sandbox')]);
    expect(await set.reload()).toBe(true);
    expect(set.health()).toEqual({});
    await set.close();
  });

  test('an account that cannot start refuses the whole new set and closes what it had built for it', async () => {
    const f = fixture([spec('sandbox')]);
    const set = await f.start();
    f.failing.add('broken');
    f.events.length = 0;
    f.change([spec('sandbox'), spec('fine'), spec('broken')]);
    expect(await set.reload()).toBe(false);
    expect(set.get('fine')).toBeUndefined();
    expect(f.events).toEqual(['build fine', 'close fine']);
    expect(set.health()).toMatchObject({
      lastFailure: 'unbuildable',
      problem: expect.stringContaining('"broken"'),
    });
    await set.close();
  });

  test('a watched change reloads; close stops and closes every account', async () => {
    const f = fixture([spec('sandbox')]);
    const set = await f.start();
    f.change([spec('sandbox'), spec('production')]);
    f.fileChanged();
    await new Promise((r) => setTimeout(r, 50));
    expect(set.get('production')).toBeDefined();
    await set.close();
    expect(f.events.filter((e) => e.startsWith('close')).sort()).toEqual([
      'close production',
      'close sandbox',
    ]);
  });

  test('start-up fails on an invalid source with its ConfigError', async () => {
    const f = fixture([]);
    f.change(new ConfigError([{ variable: 'UPSTREAM_ACCOUNTS_FILE', message: 'is not valid JSON' }]));
    await expect(f.start()).rejects.toBeInstanceOf(ConfigError);
  });
});
