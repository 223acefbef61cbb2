// A real redis-server (and Sentinel) with tls-auth-clients: refused without a client certificate or with one from
// another CA, served with REDIS_TLS_CERT_FILE / REDIS_TLS_KEY_FILE, whichever topology the gateway reaches it by.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../../src/config/load-config';
import { createRedisClient, type RedisClient } from '../../../src/store/redis-connection';
import { freePort, waitFor } from '../../support/ports';
import { tempDir } from '../../support/temp-dir';
import { createTestPki, type TestPki } from '../../support/test-certificates';

jest.setTimeout(60_000);

let pki: TestPki;
let dir: string;
let masterPort: number;
let sentinelPort: number;
const children: ChildProcess[] = [];
const clients: RedisClient[] = [];
let files: { caFile: string; certFile: string; keyFile: string; strangerCert: string; strangerKey: string };

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}

/** Redis's own client, with the gateway's client certificate: how the test knows the servers are up. */
function cli(port: number, ...args: string[]): string {
  return execFileSync(
    'redis-cli',
    [
      '--tls',
      '--cacert',
      files.caFile,
      '--cert',
      files.certFile,
      '--key',
      files.keyFile,
      '-p',
      String(port),
      ...args,
    ],
    { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] },
  );
}

beforeAll(async () => {
  pki = await createTestPki();
  dir = tempDir('bff-redis-mtls-');
  files = {
    caFile: pki.caFile,
    certFile: write('gateway.crt', pki.client.cert),
    keyFile: write('gateway.key', pki.client.key),
    strangerCert: write('stranger.crt', pki.untrustedClient.cert),
    strangerKey: write('stranger.key', pki.untrustedClient.key),
  };
  // As Bitnami's tls.authClients=true: TLS only, and every client (Sentinels included) shows a certificate of the CA.
  const tls = ['--port', '0', '--bind', '127.0.0.1', '--tls-auth-clients', 'yes']
    .concat([
      '--tls-cert-file',
      write('redis.crt', pki.good.cert),
      '--tls-key-file',
      write('redis.key', pki.good.key),
    ])
    .concat(['--tls-ca-cert-file', files.caFile])
    .concat(['--tls-client-cert-file', files.certFile, '--tls-client-key-file', files.keyFile]);
  masterPort = await freePort();
  children.push(
    spawn('redis-server', [...tls, '--tls-port', String(masterPort), '--save', '', '--dir', dir]),
  );
  await waitFor(() => cli(masterPort, 'PING').includes('PONG'), { what: 'the mTLS master', intervalMs: 100 });
  sentinelPort = await freePort();
  const conf = write(
    'sentinel.conf',
    ['tls-replication yes', `dir ${dir}`, `sentinel monitor mymaster 127.0.0.1 ${masterPort} 1`, ''].join(
      '\n',
    ),
  );
  children.push(spawn('redis-server', [conf, '--sentinel', ...tls, '--tls-port', String(sentinelPort)]));
  await waitFor(
    () => cli(sentinelPort, 'SENTINEL', 'get-master-addr-by-name', 'mymaster').includes(String(masterPort)),
    { what: 'the mTLS sentinel knows the master', timeoutMs: 15_000, intervalMs: 100 },
  );
});

afterAll(async () => {
  await Promise.all(
    clients.map((client) => (client.status === 'ready' ? client.quit() : client.disconnect())),
  );
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }),
  );
});

/** The gateway's own connection, built from the environment as the gateway builds it; PONG or the error. */
async function pingWith(env: Record<string, string>): Promise<string> {
  const config = loadConfig({ NODE_ENV: 'test', ...env });
  const client = createRedisClient(config.redis, { retry: false });
  if (!client) throw new Error('no Redis configured');
  clients.push(client);
  const errors: string[] = [];
  client.on('error', (error: Error) => errors.push(error.message));
  const ready = await new Promise<string>((resolve) => {
    const timer = setTimeout(() => resolve('not ready after 5 s'), 5_000);
    client.once('ready', () => {
      clearTimeout(timer);
      resolve('ready');
    });
    client.once('end', () => {
      clearTimeout(timer);
      resolve('connection closed');
    });
  });
  if (ready !== 'ready') return `${ready}: ${errors.join('; ')}`;
  return client.ping();
}

const standalone = () => ({ REDIS_URL: `rediss://127.0.0.1:${masterPort}`, REDIS_TLS_CA_FILE: files.caFile });
const sentinel = () => ({
  REDIS_SENTINELS: `127.0.0.1:${sentinelPort}`,
  REDIS_SENTINEL_NAME: 'mymaster',
  REDIS_TLS: 'true',
  REDIS_TLS_CA_FILE: files.caFile,
});

describe.each([
  ['standalone (rediss://)', standalone],
  ['Sentinel (REDIS_TLS, the Sentinels included)', sentinel],
])('Redis requiring client certificates, %s', (_name, topology) => {
  test('refuses the gateway without a client certificate', async () => {
    expect(await pingWith(topology())).toMatch(/^(connection closed|not ready after 5 s): \S/);
  });

  test('refuses a client certificate from another CA', async () => {
    const env = {
      ...topology(),
      REDIS_TLS_CERT_FILE: files.strangerCert,
      REDIS_TLS_KEY_FILE: files.strangerKey,
    };
    expect(await pingWith(env)).toMatch(/^(connection closed|not ready after 5 s): \S/);
  });

  test('serves the gateway with REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE', async () => {
    const env = { ...topology(), REDIS_TLS_CERT_FILE: files.certFile, REDIS_TLS_KEY_FILE: files.keyFile };
    expect(await pingWith(env)).toBe('PONG');
  });
});
