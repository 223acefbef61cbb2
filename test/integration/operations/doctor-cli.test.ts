// `npm run doctor` as a process against a real simulator: each failure named, exit codes, no secret printed.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import { PASSWORD, USERNAME, writeClientsFile } from '../../support/ops-fixture';
import { freePort } from '../../support/ports';
import { type RedisServer, startRedisServer } from '../../support/redis-server';
import { runToExit } from '../../support/run-to-exit';
import { tempDir } from '../../support/temp-dir';

function runDoctor(env: Record<string, string>) {
  return runToExit('src/operations/doctor-cli.ts', env);
}

const upstreamEnv = (url: string, password = PASSWORD) => ({
  // A plain-http simulator: production rules (NODE_ENV unset with an upstream) would refuse it.
  NODE_ENV: 'test',
  UPSTREAM_BASE_URL: url,
  UPSTREAM_ALLOW_HTTP: 'true',
  UPSTREAM_USERNAME: USERNAME,
  UPSTREAM_PASSWORD: password,
});

function expectNoSecret(output: string, ...secrets: string[]) {
  for (const secret of [USERNAME, PASSWORD, 'eyJ', ...secrets]) expect(output).not.toContain(secret);
}

const DURABLE_REDIS = ['--appendonly', 'yes', '--appendfsync', 'everysec'];

describe('npm run doctor', () => {
  let simulator: RunningSimulator;
  let fenced: RunningSimulator;
  let redis: RedisServer;
  /** As the test support starts it: no append-only file, no snapshots (a restart empties it). */
  let volatileRedis: RedisServer;
  /** A managed service's habit: CONFIG renamed away. */
  let configless: RedisServer;

  beforeAll(async () => {
    [simulator, fenced, redis, volatileRedis, configless] = await Promise.all([
      startSimulator({ port: 0, username: USERNAME, password: PASSWORD }),
      startSimulator({ port: 0, username: USERNAME, password: PASSWORD, allowedIps: ['10.9.9.9'] }),
      startRedisServer(DURABLE_REDIS),
      startRedisServer(),
      startRedisServer([...DURABLE_REDIS, '--rename-command', 'CONFIG', '']),
    ]);
  });

  afterAll(async () => {
    await Promise.all([
      simulator?.close(),
      fenced?.close(),
      redis?.stop(),
      volatileRedis?.stop(),
      configless?.stop(),
    ]);
  });

  test('good credentials and a reachable Redis: every step ✓, exit 0', async () => {
    const clientsFile = writeClientsFile();
    const { code, output } = await runDoctor({
      ...upstreamEnv(simulator.url),
      REDIS_URL: redis.url,
      CLIENTS_FILE: clientsFile,
    });
    expect(output).toContain('✓ configuration: valid');
    expect(output).toContain(`✓ client registry: ${clientsFile}: 2 clients`);
    expect(output).toMatch(/✓ token store: Redis at 127\.0\.0\.1:\d+ answered PING/);
    expect(output).toMatch(/✓ usage store: Redis at 127\.0\.0\.1:\d+ .*keeps the ledger: append-only file/);
    expect(output).toContain('✓ upstream token request');
    expect(output).toContain('All checks passed.');
    expect(code).toBe(0);
    expectNoSecret(output);
  });

  test('a Redis without persistence holds the ledger: the usage store fails naming persistence, with the fix', async () => {
    const { code, output } = await runDoctor({
      ...upstreamEnv(simulator.url),
      REDIS_URL: volatileRedis.url,
      CLIENTS_FILE: writeClientsFile(),
    });
    expect(output).toMatch(
      /✗ usage store: Redis at 127\.0\.0\.1:\d+ .*would lose the usage ledger and the quota counters: persistence is off/,
    );
    expect(output).toContain('fix: run that Redis with appendonly yes, appendfsync everysec');
    expect(code).toBe(1);
  });

  test('USAGE_REDIS_URL: the durable Redis of the ledger is the one checked, apart from the token store', async () => {
    const { code, output } = await runDoctor({
      ...upstreamEnv(simulator.url),
      REDIS_URL: volatileRedis.url,
      USAGE_REDIS_URL: redis.url,
      CLIENTS_FILE: writeClientsFile(),
    });
    expect(output).toContain(
      `✓ usage store: Redis at 127.0.0.1:${redis.port} (USAGE_REDIS_*) keeps the ledger`,
    );
    expect(code).toBe(0);
  });

  test('USAGE_REDIS_URL at a read-only replica (durable as it is): fails, the ledger could not be written there', async () => {
    const replica = await startRedisServer([
      ...DURABLE_REDIS,
      '--replicaof',
      '127.0.0.1',
      String(redis.port),
    ]);
    try {
      const { code, output } = await runDoctor({
        ...upstreamEnv(simulator.url),
        REDIS_URL: redis.url,
        USAGE_REDIS_URL: replica.url,
        CLIENTS_FILE: writeClientsFile(),
      });
      expect(output).toMatch(
        /✗ usage store: Redis at 127\.0\.0\.1:\d+ \(USAGE_REDIS_\*\) is a read-only replica/,
      );
      expect(output).toContain('fix: point USAGE_REDIS_URL at the master');
      expect(code).toBe(1);
    } finally {
      await replica.stop();
    }
  });

  test('a Redis that refuses CONFIG GET (a managed service): unknown, a warning, never a failure', async () => {
    const { code, output } = await runDoctor({
      ...upstreamEnv(simulator.url),
      REDIS_URL: configless.url,
      CLIENTS_FILE: writeClientsFile(),
    });
    expect(output).toMatch(/! usage store: unknown: Redis at 127\.0\.0\.1:\d+ .*refused CONFIG GET/);
    expect(code).toBe(0);
  });

  test('a wrong password: non-zero, names the credential problem, never prints it', async () => {
    const wrong = 'Wr0ng-Passw0rd-Value';
    const { code, output } = await runDoctor(upstreamEnv(simulator.url, wrong));
    expect(code).not.toBe(0);
    expect(output).toContain('✗ upstream token request (account default): bad credentials');
    expect(output).toContain('UPSTREAM_USERNAME/UPSTREAM_PASSWORD');
    expect(output).toContain('the configured username and password');
    expectNoSecret(output, wrong);
  });

  test('an IP outside the allow-list: non-zero, tells to whitelist the egress IP', async () => {
    const { code, output } = await runDoctor(upstreamEnv(fenced.url));
    expect(code).not.toBe(0);
    expect(output).toContain('IP not whitelisted');
    expect(output).toContain('whitelist');
    // The local address of the socket is printed (loopback here), with the NAT caveat.
    expect(output).toContain('127.0.0.1');
    expect(output).toContain('NAT');
    expectNoSecret(output);
  });

  test('an unreachable upstream: non-zero, names the refused connection', async () => {
    const closedPort = await freePort();
    const { code, output } = await runDoctor(upstreamEnv(`http://127.0.0.1:${closedPort}`));
    expect(code).not.toBe(0);
    expect(output).toContain('connection refused');
    expect(output).toContain('ECONNREFUSED');
  });

  test('an unreachable Redis fails the store step without printing its password', async () => {
    const closedPort = await freePort();
    const { code, output } = await runDoctor({
      ...upstreamEnv(simulator.url),
      REDIS_URL: `redis://:redis-Secret-42@127.0.0.1:${closedPort}`,
    });
    expect(code).not.toBe(0);
    expect(output).toContain('✗ token store');
    // The fleet's back-off cannot be read: the doctor does not log in (it could lengthen a lock-out).
    expect(output).toContain('! login back-off (account default): cannot be read');
    expect(output).toContain('- upstream token request (account default): not attempted');
    expectNoSecret(output, 'redis-Secret-42');
  });

  test('a bad configuration: non-zero, names each bad variable, skips the rest', async () => {
    const { code, output } = await runDoctor({
      ...upstreamEnv('ftp://payments.example'),
      REDIS_URL: 'http://not-redis',
    });
    expect(code).not.toBe(0);
    expect(output).toContain('✗ configuration: invalid');
    expect(output).toContain('UPSTREAM_BASE_URL');
    expect(output).toContain('REDIS_URL');
    expect(output).toContain('- upstream token request: needs a valid configuration');
    expectNoSecret(output);
  });

  test('a missing client registry: non-zero, names the file and why the gateway would not start', async () => {
    const missing = join(tempDir('bff-doctor-'), 'nowhere.json');
    const { code, output } = await runDoctor({ ...upstreamEnv(simulator.url), CLIENTS_FILE: missing });
    expect(code).not.toBe(0);
    expect(output).toContain(`✗ client registry: ${missing} cannot be read (ENOENT)`);
    expect(output).toContain('CLIENTS_FILE');
    expect(output).not.toContain('All checks passed.');
  });

  test('an invalid registry entry: non-zero, the schema reason, never the offending value', async () => {
    const file = join(tempDir('bff-doctor-'), 'clients.json');
    const notAHash = 'plain-api-key-pasted-by-mistake';
    writeFileSync(
      file,
      JSON.stringify({ clients: [{ id: 'checkout-web', keys: [notAHash], scopes: ['plans:read'] }] }),
    );
    const { code, output } = await runDoctor({ ...upstreamEnv(simulator.url), CLIENTS_FILE: file });
    expect(code).not.toBe(0);
    expect(output).toContain('✗ client registry:');
    expect(output).toContain('client "checkout-web" (clients[0]) keys[0]: must be "sha256:"');
    expect(output).not.toContain(notAHash);
    // The other checks still ran: the registry does not hide an upstream problem.
    expect(output).toContain('✓ upstream token request');
  });

  test('the empty registry shipped in config/clients.json: a warning that nobody is let in, exit 0', async () => {
    const { code, output } = await runDoctor(upstreamEnv(simulator.url));
    expect(output).toMatch(/! client registry: \S*config\/clients\.json lists no client: nobody is let in/);
    expect(output).toContain('npm run client-key');
    expect(output).toContain('No check failed; 1 warning above.');
    expect(code).toBe(0);
  });

  test('local mode: the bundled simulator answers with its development credentials', async () => {
    const { code, output } = await runDoctor({});
    expect(output).toContain('memory store (local mode');
    expect(output).toContain('the bundled simulator');
    expect(code).toBe(0);
  });

  test('an unknown argument: exit 2 with the usage, nothing probed', async () => {
    const { code, output } = await runToExit('src/operations/doctor-cli.ts', upstreamEnv(simulator.url), [
      '--force-logon',
    ]);
    expect(code).toBe(2);
    expect(output).toContain('unknown argument --force-logon');
    expect(output).toContain('Usage: npm run doctor [-- --force-login]');
  });
});
