// Two gateway replicas on a real Redis Sentinel and on a real 3-master Redis Cluster share one upstream token.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';
import { API_KEY, gatewayEnv, PASSWORD, PLAN_ID, USERNAME } from '../support/ops-fixture';
import { freePort, waitFor } from '../support/ports';
import { type RedisServer, startRedisServer } from '../support/redis-server';
import { runToExit } from '../support/run-to-exit';
import { tempDir } from '../support/temp-dir';
import { createTestPki } from '../support/test-certificates';

jest.setTimeout(90_000);

const TOKEN_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64');

function processEnv(upstreamUrl: string, extra: Record<string, string>): Record<string, string> {
  const { PORT: _port, HOST: _host, ...env } = gatewayEnv(upstreamUrl, { TOKEN_ENCRYPTION_KEY, ...extra });
  return env;
}

function redisCli(port: number, ...args: string[]): string {
  return execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', timeout: 10_000 });
}

function spawnRedis(args: string[]): ChildProcess {
  return spawn('redis-server', args, { stdio: 'ignore' });
}

async function stopAll(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }),
  );
}

function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A Cluster node needs its port and the bus port (port + 10000) free, so ports stay below 55535. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await listenable(port)) && (await listenable(port + 10_000))) {
      taken.add(port);
      taken.add(port + 10_000);
      return port;
    }
  }
}

/**
 * /readyz is 200 even while Redis is not connected yet (degraded: a replica serves on its own logins), so the
 * test waits for each replica's store to be connected before the burst.
 */
async function storesConnected(replicas: GatewayProcess[]): Promise<void> {
  for (const replica of replicas)
    await waitFor(
      async () => {
        const ready = (await (await fetch(`${replica.url}/readyz`)).json()) as {
          checks: { store: { state: string } };
        };
        return ready.checks.store.state === 'ok';
      },
      { what: 'the replica connected to Redis', intervalMs: 50 },
    );
}

/** A burst of plan GETs on both replicas at once. */
async function burstOnBoth(replicas: GatewayProcess[]): Promise<number[]> {
  await storesConnected(replicas);
  const calls = replicas.flatMap((replica) =>
    Array.from({ length: 5 }, () =>
      fetch(`${replica.url}/api/subscriptions/plan/${PLAN_ID}`, { headers: { 'x-api-key': API_KEY } }).then(
        (r) => r.status,
      ),
    ),
  );
  return Promise.all(calls);
}

describe('Redis Sentinel', () => {
  let master: RedisServer;
  let sentinel: ChildProcess;
  let sentinelPort: number;
  let simulator: RunningSimulator;
  const replicas: GatewayProcess[] = [];

  beforeAll(async () => {
    master = await startRedisServer();
    sentinelPort = await freePort();
    const dir = tempDir('bff-sentinel-');
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `port ${sentinelPort}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor mymaster 127.0.0.1 ${master.port} 1`,
        'sentinel down-after-milliseconds mymaster 5000',
        '',
      ].join('\n'),
    );
    sentinel = spawnRedis([conf, '--sentinel']);
    await waitFor(
      () =>
        redisCli(sentinelPort, 'SENTINEL', 'get-master-addr-by-name', 'mymaster').includes(
          String(master.port),
        ),
      {
        what: 'sentinel knows the master',
        timeoutMs: 15_000,
        intervalMs: 100,
      },
    );
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  });

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop('SIGKILL')));
    await simulator?.close();
    if (sentinel) await stopAll([sentinel]);
    await master?.stop();
  });

  test('two replicas found the master through the sentinel and share one login', async () => {
    const env = processEnv(simulator.url, {
      REDIS_SENTINELS: `127.0.0.1:${sentinelPort}`,
      REDIS_SENTINEL_NAME: 'mymaster',
    });
    replicas.push(...(await Promise.all([startGatewayProcess({ env }), startGatewayProcess({ env })])));
    const statuses = await burstOnBoth(replicas);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(simulator.stats().logins).toBe(1);
    // The pair really lives on the master, under its hash-tagged key.
    expect(redisCli(master.port, '--scan', '--pattern', 'bff:{token:*}:pair').trim()).toMatch(
      /^bff:\{token:[0-9a-f]+\}:pair$/,
    );
    for (const replica of replicas) {
      const ready = (await (await fetch(`${replica.url}/readyz`)).json()) as { checks: { store: unknown } };
      expect(ready.checks.store).toEqual({ state: 'ok', kind: 'redis' });
    }
  });
});

describe('Redis Sentinel over TLS and with a password, Sentinels included', () => {
  const REDIS_PASSWORD = 'sentinel-redis-password-0123';
  let children: ChildProcess[] = [];
  let simulator: RunningSimulator;
  let replica: GatewayProcess | undefined;
  let caFile: string;
  let sentinelPort: number;

  beforeAll(async () => {
    const pki = await createTestPki();
    caFile = pki.caFile;
    const dir = tempDir('bff-sentinel-tls-');
    writeFileSync(join(dir, 'redis.crt'), pki.good.cert);
    writeFileSync(join(dir, 'redis.key'), pki.good.key);
    // As the production overlay's Redis (Bitnami tls.enabled=true, auth.sentinel=true): TLS only, no plaintext port,
    // and one password for the master and the Sentinels.
    const tls = [
      '--port',
      '0',
      '--bind',
      '127.0.0.1',
      '--tls-auth-clients',
      'no',
      '--requirepass',
      REDIS_PASSWORD,
    ]
      .concat(['--tls-cert-file', join(dir, 'redis.crt'), '--tls-key-file', join(dir, 'redis.key')])
      .concat(['--tls-ca-cert-file', caFile]);
    const masterPort = await freePort();
    children.push(spawnRedis([...tls, '--tls-port', String(masterPort), '--save', '', '--dir', dir]));
    sentinelPort = await freePort();
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `dir ${dir}`,
        'tls-replication yes',
        `sentinel monitor mymaster 127.0.0.1 ${masterPort} 1`,
        `sentinel auth-pass mymaster ${REDIS_PASSWORD}`,
        '',
      ].join('\n'),
    );
    children.push(spawnRedis([conf, '--sentinel', ...tls, '--tls-port', String(sentinelPort)]));
    const cli = [
      '--tls',
      '--cacert',
      caFile,
      '-p',
      String(sentinelPort),
      '-a',
      REDIS_PASSWORD,
      '--no-auth-warning',
    ];
    await waitFor(
      () =>
        execFileSync('redis-cli', [...cli, 'SENTINEL', 'get-master-addr-by-name', 'mymaster'], {
          encoding: 'utf8',
          timeout: 10_000,
          stdio: ['ignore', 'pipe', 'ignore'],
        }).includes(String(masterPort)),
      { what: 'the TLS sentinel knows the master', timeoutMs: 15_000, intervalMs: 100 },
    );
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  });

  afterAll(async () => {
    await replica?.stop('SIGKILL');
    await simulator?.close();
    await stopAll(children);
    children = [];
  });

  test('a replica asks the Sentinels over TLS and with the password too, and reaches the master', async () => {
    const env = processEnv(simulator.url, {
      REDIS_SENTINELS: `127.0.0.1:${sentinelPort}`,
      REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_TLS: 'true',
      REDIS_PASSWORD,
      // The pod's way of trusting a private CA for Redis (deploy/k8s/overlays/production).
      NODE_EXTRA_CA_CERTS: caFile,
    });
    replica = await startGatewayProcess({ env });
    expect(await burstOnBoth([replica])).toEqual([200, 200, 200, 200, 200]);
  });
});

describe("Redis Sentinel with passwords of its own: another than the master's, or none", () => {
  const MASTER_PASSWORD = 'master-password-0123';
  const SENTINEL_PASSWORD = 'sentinel-password-4567';
  let children: ChildProcess[] = [];
  let simulator: RunningSimulator;
  const replicas: GatewayProcess[] = [];
  /** A Sentinel with requirepass of its own (vanilla Redis: independent of the master's). */
  let protectedSentinelPort: number;
  /** A Sentinel without a password in front of a master with one (the common sentinel.conf: auth-pass only). */
  let openSentinelPort: number;

  async function startSentinel(dir: string, masterPort: number, ownPassword?: string): Promise<number> {
    const port = await freePort();
    const conf = join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        ...(ownPassword ? [`requirepass ${ownPassword}`] : []),
        `sentinel monitor mymaster 127.0.0.1 ${masterPort} 1`,
        `sentinel auth-pass mymaster ${MASTER_PASSWORD}`,
        '',
      ].join('\n'),
    );
    children.push(spawnRedis([conf, '--sentinel']));
    const auth = ownPassword ? ['-a', ownPassword, '--no-auth-warning'] : [];
    await waitFor(
      () =>
        redisCli(port, ...auth, 'SENTINEL', 'get-master-addr-by-name', 'mymaster').includes(
          String(masterPort),
        ),
      { what: 'the sentinel knows the master', timeoutMs: 15_000, intervalMs: 100 },
    );
    return port;
  }

  beforeAll(async () => {
    const dir = tempDir('bff-sentinel-passwords-');
    const masterPort = await freePort();
    children.push(
      spawnRedis([
        '--port',
        String(masterPort),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--dir',
        dir,
        '--requirepass',
        MASTER_PASSWORD,
      ]),
    );
    protectedSentinelPort = await startSentinel(dir, masterPort, SENTINEL_PASSWORD);
    openSentinelPort = await startSentinel(dir, masterPort);
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  });

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop('SIGKILL')));
    await simulator?.close();
    await stopAll(children);
    children = [];
  });

  test('REDIS_SENTINEL_PASSWORD opens a Sentinel whose password is not REDIS_PASSWORD', async () => {
    const env = processEnv(simulator.url, {
      REDIS_SENTINELS: `127.0.0.1:${protectedSentinelPort}`,
      REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_PASSWORD: MASTER_PASSWORD,
      REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
    });
    const replica = await startGatewayProcess({ env });
    replicas.push(replica);
    expect(await burstOnBoth([replica])).toEqual([200, 200, 200, 200, 200]);
  });

  test('a Sentinel without a password still answers when only the master has one (REDIS_PASSWORD)', async () => {
    const env = processEnv(simulator.url, {
      REDIS_SENTINELS: `127.0.0.1:${openSentinelPort}`,
      REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_PASSWORD: MASTER_PASSWORD,
    });
    const replica = await startGatewayProcess({ env });
    replicas.push(replica);
    expect(await burstOnBoth([replica])).toEqual([200, 200, 200, 200, 200]);
  });
});

describe('Redis Cluster (3 masters)', () => {
  const nodes: ChildProcess[] = [];
  const ports: number[] = [];
  let simulator: RunningSimulator;
  const replicas: GatewayProcess[] = [];

  beforeAll(async () => {
    const dir = tempDir('bff-cluster-');
    const taken = new Set<number>();
    for (let i = 0; i < 3; i++) ports.push(await clusterPort(taken));
    for (const port of ports) {
      nodes.push(
        spawnRedis([
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, `nodes-${port}.conf`),
          '--dir',
          dir,
          '--save',
          '',
          '--appendonly',
          'no',
        ]),
      );
    }
    for (const port of ports)
      await waitFor(() => redisCli(port, 'PING').trim() === 'PONG', { what: `cluster node ${port}` });
    execFileSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { stdio: 'ignore', timeout: 30_000 },
    );
    await waitFor(() => ports.every((p) => redisCli(p, 'CLUSTER', 'INFO').includes('cluster_state:ok')), {
      what: 'cluster_state:ok',
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
  });

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop('SIGKILL')));
    await simulator?.close();
    await stopAll(nodes);
  });

  test('two replicas on the cluster share one login and one rate-limit counter; the lock and the pair sit in one slot', async () => {
    const env = processEnv(simulator.url, {
      REDIS_CLUSTER_NODES: ports.map((p) => `127.0.0.1:${p}`).join(','),
    });
    replicas.push(...(await Promise.all([startGatewayProcess({ env }), startGatewayProcess({ env })])));
    const statuses = await burstOnBoth(replicas);
    expect(statuses.every((s) => s === 200)).toBe(true);
    if (simulator.stats().logins !== 1) console.log(replicas.map((r) => r.logs()).join('\n---\n'));
    expect(simulator.stats().logins).toBe(1);

    const keys = ports.flatMap((p) =>
      redisCli(p, '--scan', '--pattern', 'bff:{token:*').split('\n').filter(Boolean),
    );
    expect(keys.some((key) => key.endsWith(':pair'))).toBe(true);
    const slots = new Set(keys.map((key) => redisCli(ports[0]!, 'CLUSTER', 'KEYSLOT', key).trim()));
    expect(slots.size).toBe(1);

    // Both replicas' calls were counted in the client's one window counter on the cluster (leases claimed there,
    // not counted in replica memory): at least the 10 calls, at most what the leases claimed beyond them.
    const counters = ports.flatMap((p) =>
      redisCli(p, '--scan', '--pattern', 'bff:rl:*').split('\n').filter(Boolean),
    );
    expect(counters).toEqual(['bff:rl:60:ops-client']);
    const counted = Number(redisCli(ports[0]!, '-c', 'GET', 'bff:rl:60:ops-client').trim());
    expect(counted).toBeGreaterThanOrEqual(10);
    expect(counted).toBeLessThan(10 + 2 * 10);
  });

  test('USAGE_REDIS_CLUSTER_NODES: the ledger and its marker go to the cluster, tokens stay in their Redis; the doctor reads the cluster', async () => {
    const tokens = await startRedisServer();
    try {
      const env = processEnv(simulator.url, {
        REDIS_URL: tokens.url,
        REDIS_KEY_PREFIX: 'apart:',
        USAGE_REDIS_CLUSTER_NODES: ports.map((p) => `127.0.0.1:${p}`).join(','),
      });
      const replica = await startGatewayProcess({ env });
      replicas.push(replica);
      expect((await burstOnBoth([replica])).every((s) => s === 200)).toBe(true);
      const usageKeys = () =>
        ports.flatMap((p) => redisCli(p, '--scan', '--pattern', 'apart:usage:*').split('\n').filter(Boolean));
      // Written within a flush (one second): the day's hash and the store's marker, in different slots.
      await waitFor(() => usageKeys().length === 2, { what: 'the ledger on the cluster', intervalMs: 100 });
      expect(usageKeys().sort()).toEqual([
        `apart:usage:${new Date().toISOString().slice(0, 10)}`,
        'apart:usage:store',
      ]);
      expect(redisCli(tokens.port, '--scan', '--pattern', 'apart:usage:*').trim()).toBe('');
      expect(redisCli(tokens.port, '--scan', '--pattern', 'apart:{token:*').trim()).not.toBe('');

      // The doctor asks the cluster (CONFIG GET through one node): these nodes keep nothing on disk.
      const { code, output } = await runToExit('src/operations/doctor-cli.ts', env);
      expect(output).toMatch(
        /✗ usage store: Redis Cluster 127\.0\.0\.1:\d+.* \(USAGE_REDIS_\*\) would lose the usage ledger .*persistence is off/,
      );
      expect(code).toBe(1);
    } finally {
      await tokens.stop();
    }
  });
});
