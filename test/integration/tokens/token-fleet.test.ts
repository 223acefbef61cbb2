// A fleet of token managers against a real redis-server and the simulator: one login for a cold fleet, one refresh per token lifetime.
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { tokenKeys } from '../../../src/keys/redis-keys';
import { startSimulator } from '../../../src/simulator/simulator';
import { createCredentialSource } from '../../../src/tokens/internal/credentials';
import { tempDir } from '../../support/temp-dir';
import { type Fleet, PASSWORD, sleep, startFleet, steadyLoad, USERNAME, waitReady } from './fleet-harness';

jest.setTimeout(60_000);

let fleet: Fleet | undefined;
afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
});

const tokenCalls = (f: Fleet) => {
  const s = f.simulator.stats();
  return s.logins + s.refreshes;
};

describe('a fleet of replicas sharing one Redis', () => {
  it('a cold burst of 90 calls across 3 replicas costs exactly one login', async () => {
    fleet = await startFleet();
    const f = fleet;
    const tokens = await Promise.all(
      f.replicas.flatMap((r) => Array.from({ length: 30 }, () => r.manager.getAccessToken())),
    );
    expect(f.simulator.stats().logins).toBe(1);
    expect(new Set(tokens.map((t) => t.value)).size).toBe(1);
    const statuses = await Promise.all(f.replicas.map((r) => f.callPlan(r)));
    expect(statuses).toEqual([200, 200, 200]);
    expect(f.logs()).not.toContain(tokens[0].value);
    expect(f.logs()).not.toContain(PASSWORD);
    expect(f.logs()).not.toContain(USERNAME);
  });

  it('keeps the pair in one cluster slot: pair, lock, failure record and channel share a hash tag', async () => {
    fleet = await startFleet({ replicas: 1 });
    await fleet.replicas[0].manager.getAccessToken();
    const keys = tokenKeys('it:', fleet.simulator.url, USERNAME);
    const tag = (name: string) => /\{[^}]+\}/.exec(name)?.[0];
    expect(tag(keys.pair)).toMatch(/^\{token:[0-9a-f]{16}\}$/);
    for (const name of [keys.lock, keys.failure, keys.channel]) expect(tag(name)).toBe(tag(keys.pair));
    expect(await fleet.replicas[0].redis.exists(keys.pair)).toBe(1);
    // Redis TTL = refresh expiry (24 h here), not the access token's.
    expect(await fleet.replicas[0].redis.pttl(keys.pair)).toBeGreaterThan(86_000_000);
    expect(tokenKeys('it:', 'https://other.example', USERNAME).pair).not.toBe(keys.pair);
    expect(tokenKeys('it:', fleet.simulator.url, 'another-user').pair).not.toBe(keys.pair);
  });

  it('the lock holder announces its new pair, then the lock let go, over Redis pub/sub (never a token)', async () => {
    fleet = await startFleet({ replicas: 1 });
    const keys = tokenKeys('it:', fleet.simulator.url, USERNAME);
    const listener = fleet.replicas[0].redis.duplicate();
    const messages: string[] = [];
    try {
      if (listener.status === 'wait') await listener.connect();
      else if (listener.status !== 'ready') await once(listener, 'ready');
      await listener.subscribe(keys.channel);
      listener.on('message', (_channel: string, message: string) => messages.push(message));
      await fleet.replicas[0].manager.getAccessToken();
      for (let i = 0; i < 100 && messages.length < 2; i++) await sleep(10);
      expect(messages).toEqual(['pair', 'released']);
    } finally {
      listener.disconnect();
    }
  });

  it('over several short lifetimes the whole fleet refreshes about once per lifetime and no call fails', async () => {
    const accessTtlSeconds = 3;
    const skewSeconds = 1;
    fleet = await startFleet({
      simulator: { accessTtlSeconds },
      settings: { refreshSkewSeconds: skewSeconds },
    });
    const durationMs = 3 * accessTtlSeconds * 1000;
    const statuses = await steadyLoad(fleet, durationMs);
    expect(statuses.length).toBeGreaterThan(100);
    expect(statuses.every((s) => s === 200)).toBe(true);
    const calls = tokenCalls(fleet);
    // A token is refreshed skew (+ up to 10 % jitter) before its exp; exp has whole-second precision, so a cycle
    // lasts between ttl - 1 - skew - jitter and ttl - skew seconds: 0.9 s to 2 s here.
    const cycles = Math.ceil(durationMs / ((accessTtlSeconds - 1 - skewSeconds * 1.1) * 1000));
    console.log(
      `steady load: ${statuses.length} calls, ${JSON.stringify(fleet.simulator.stats())}, bound ${cycles + 1}`,
    );
    expect(calls).toBeLessThanOrEqual(cycles + 1);
    expect(fleet.simulator.stats().logins).toBe(1);
    expect(fleet.simulator.stats().unauthorized).toBe(0);
  });

  it('tokens revoked at the upstream mid-load: no caller error, the fleet recovers with one login', async () => {
    fleet = await startFleet();
    const f = fleet;
    const load = steadyLoad(f, 2_000, 20);
    await sleep(500);
    const before = f.simulator.stats();
    f.simulator.revokeTokens();
    const statuses = await load;
    const after = f.simulator.stats();
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(after.logins - before.logins).toBe(1);
    expect(after.unauthorized - before.unauthorized).toBeGreaterThanOrEqual(1);
    console.log(
      `revocation: ${statuses.length} calls, ${after.unauthorized - before.unauthorized} upstream 401s, 1 login`,
    );
  });

  it('Redis killed mid-load: no caller error; Redis back: the fleet converges on one shared pair again', async () => {
    const accessTtlSeconds = 3;
    fleet = await startFleet({ simulator: { accessTtlSeconds }, settings: { refreshSkewSeconds: 1 } });
    const f = fleet;
    const load = steadyLoad(f, 5_000, 20);
    await sleep(500);
    await f.redisServer.kill();
    await sleep(3_500);
    const statusesBeforeRestart = load;
    await f.redisServer.restart();
    const statuses = await statusesBeforeRestart;
    expect(statuses.every((s) => s === 200)).toBe(true);
    await Promise.all(f.replicas.map((r) => waitReady(r.redis)));
    let converged = false;
    for (let i = 0; i < 80 && !converged; i++) {
      const tokens = await Promise.all(f.replicas.map((r) => r.manager.getAccessToken()));
      converged = new Set(tokens.map((t) => t.value)).size === 1;
      if (!converged) await sleep(100);
    }
    expect(converged).toBe(true);
    expect(f.replicas.every((r) => r.manager.status().storeHealthy)).toBe(true);
    const more = await steadyLoad(f, 1_000, 20);
    expect(more.every((s) => s === 200)).toBe(true);
  });

  it('credentials refused: UPSTREAM_AUTH_FAILED, and 50 calls cost at most 3 login attempts', async () => {
    fleet = await startFleet({ simulator: { password: 'the-real-password' } });
    const f = fleet;
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        f.replicas[i % 3].manager.getAccessToken().then(
          () => 'ok',
          (error) => error.reason,
        ),
      ),
    );
    expect(new Set(results)).toEqual(new Set(['UPSTREAM_AUTH_FAILED']));
    // And the same later, one call at a time.
    for (let i = 0; i < 50; i++) {
      await expect(f.replicas[i % 3].manager.getAccessToken()).rejects.toMatchObject({
        reason: 'UPSTREAM_AUTH_FAILED',
      });
    }
    const stats = f.simulator.stats();
    expect(stats.loginFailures).toBeGreaterThanOrEqual(1);
    expect(stats.loginFailures).toBeLessThanOrEqual(3);
    expect(f.replicas[1].manager.status().lastFailure).toBe('UPSTREAM_AUTH_FAILED');
  });

  it('IP refused: UPSTREAM_IP_NOT_WHITELISTED, backed off as well', async () => {
    fleet = await startFleet({ simulator: { allowedIps: ['10.1.2.3'] } });
    const f = fleet;
    for (let i = 0; i < 30; i++) {
      await expect(f.replicas[i % 3].manager.getAccessToken()).rejects.toMatchObject({
        reason: 'UPSTREAM_IP_NOT_WHITELISTED',
      });
    }
    expect(f.simulator.stats().forbidden).toBeLessThanOrEqual(3);
  });
});

describe('credential rotation through files', () => {
  it('new files drop the old tokens and log in with the new username', async () => {
    const dir = tempDir('bff-creds-');
    writeFileSync(join(dir, 'username'), `${USERNAME}\n`);
    writeFileSync(join(dir, 'password'), `${PASSWORD}\n`);
    const logger = pino({ level: 'silent' }, new Writable({ write: (_c, _e, cb) => cb() }));
    const sources: Awaited<ReturnType<typeof createCredentialSource>>[] = [];
    for (let i = 0; i < 2; i++) {
      sources.push(
        await createCredentialSource(
          { usernameFile: join(dir, 'username'), passwordFile: join(dir, 'password') },
          { logger, pollIntervalMs: 200, debounceMs: 20 },
        ),
      );
    }
    let next = 0;
    fleet = await startFleet({ replicas: 2, credentials: () => sources[next++] });
    const f = fleet;
    const old = await f.replicas[0].manager.getAccessToken();
    expect((await f.replicas[1].manager.getAccessToken()).value).toBe(old.value);

    // The provider moves the account: only the new credentials work from now on (same URL).
    const port = f.simulator.port;
    await f.simulator.close();
    const moved = await startSimulator({ port, username: 'rotated-merchant', password: 'rotated-password' });
    Object.assign(f.simulator, moved);
    writeFileSync(join(dir, 'password'), 'rotated-password\n');
    writeFileSync(join(dir, 'username'), 'rotated-merchant\n');
    await waitFor(() => sources.every((s) => s.current().username === 'rotated-merchant'));

    const tokens = await Promise.all(f.replicas.map((r) => r.manager.getAccessToken()));
    expect(tokens[0].value).not.toBe(old.value);
    expect(tokens[1].value).toBe(tokens[0].value);
    expect(moved.stats().logins).toBe(1);
    expect(await f.replicas[0].redis.exists(tokenKeys('it:', f.simulator.url, 'rotated-merchant').pair)).toBe(
      1,
    );
    expect(await f.callPlan(f.replicas[1])).toBe(200);
    for (const s of sources) s.close();
  });
});

async function waitFor(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(20);
  }
}
