// `npm run doctor` in a loop while the fleet backs off after a refused login: a real gateway process refuses its
// login at the real simulator and records the back-off in a real Redis; the doctor reads it and, counted at the
// simulator, does not log in; with --force-login it logs in once; after the back-off it logs in once.
import { randomBytes } from 'node:crypto';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { runToExit } from '../support/run-to-exit';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const API_KEY = `pbk_doctor-backoff-${randomBytes(12).toString('hex')}`;
const USERNAME = 'doctor-backoff-merchant';
const PASSWORD = `doctor-Pw-${randomBytes(6).toString('hex')}`;
const WRONG = `wrong-Pw-${randomBytes(6).toString('hex')}`;
const ENCRYPTION_KEY = randomBytes(32).toString('base64');

jest.setTimeout(180_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the doctor and the fleet login back-off', () => {
  let redis: RedisServer;
  let simulator: RunningSimulator;
  const gateways: GatewayProcess[] = [];
  let clientsFile: string;

  beforeAll(async () => {
    [redis, simulator] = await Promise.all([
      startRedisServer(),
      startSimulator({ port: 0, username: USERNAME, password: PASSWORD }),
    ]);
    clientsFile = writeClientsFile([{ id: 'doctor-backoff', keys: [API_KEY], scopes: ['plans:read'] }]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([redis?.stop(), simulator?.close()]);
  });

  /** The fleet's and the doctor's environment: same upstream, credentials, Redis, prefix and encryption key. */
  const envFor = (prefix: string, minIntervalMs: number) => ({
    NODE_ENV: 'test',
    UPSTREAM_BASE_URL: simulator.url,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: WRONG,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: prefix,
    TOKEN_ENCRYPTION_KEY: ENCRYPTION_KEY,
    TOKEN_LOGIN_MIN_INTERVAL_MS: String(minIntervalMs),
    CLIENTS_FILE: clientsFile,
  });

  /** A gateway process refuses its login once: the fleet's refusal record is in Redis. */
  async function fleetRefusedOnce(env: Record<string, string>): Promise<void> {
    const gateway = await startGatewayProcess({ env, waitUntil: 'live', startTimeoutMs: 60_000 });
    gateways.push(gateway);
    const before = simulator.stats().loginFailures;
    const res = await fetch(gateway.url + PLAN, { headers: { 'x-api-key': API_KEY } });
    expect(res.status).toBe(502);
    expect(simulator.stats().loginFailures).toBe(before + 1);
  }

  const doctor = (env: Record<string, string>, ...args: string[]) =>
    runToExit('src/operations/doctor-cli.ts', env, args);

  it('during the back-off: no login in a loop; --force-login: one; after the back-off: one', async () => {
    const long = envFor(`doctor-long-${Date.now()}:`, 120_000);
    await fleetRefusedOnce(long);
    const failures = () => simulator.stats().loginFailures;
    const logins = () => simulator.stats().logins + simulator.stats().loginFailures;
    const duringBackoff = logins();

    for (let run = 0; run < 3; run += 1) {
      const { code, output } = await doctor(long);
      expect(code).toBe(1);
      expect(output).toMatch(
        /✗ login back-off \(account default\): the fleet is backing off, (\d+ min )?(\d+ s)? ?left; last failure: 401, the provider refused the credentials/,
      );
      expect(output).toContain('- upstream token request (account default): not attempted');
      expect(output).not.toContain(WRONG);
    }
    expect(logins()).toBe(duringBackoff);

    const forced = await doctor(long, '--force-login');
    expect(forced.code).toBe(1);
    expect(forced.output).toContain('logging in once anyway (--force-login)');
    expect(forced.output).toContain('bad credentials');
    expect(forced.output).toContain('shared with the fleet');
    expect(failures()).toBe(duringBackoff + 1);

    // A shorter back-off of its own (another key prefix), waited out: the doctor logs in once, as the fleet would.
    // 8 s: long enough that the doctor's own refusal (streak 2: 16-20 s) still blocks the run after it on a loaded
    // machine, where one doctor process takes a few seconds.
    const short = envFor(`doctor-short-${Date.now()}:`, 8_000);
    await fleetRefusedOnce(short);
    const blocked = logins();
    // The wait is 8 s plus up to 25 % jitter.
    await sleep(10_500);
    const after = await doctor(short);
    expect(after.output).toContain('✓ login back-off (account default): none: the fleet would log in now');
    expect(after.output).toContain('the last refusal, 401');
    expect(after.output).toContain('✗ upstream token request (account default): bad credentials');
    expect(logins()).toBe(blocked + 1);
    // Its refusal was shared: the next run backs off again instead of logging in.
    expect((await doctor(short)).output).toContain('the fleet is backing off');
    expect(logins()).toBe(blocked + 1);
  });
});
