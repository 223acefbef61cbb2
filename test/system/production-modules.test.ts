// What a real process loads, read from its own module cache as it exits: production start-up (an upstream, NODE_ENV
// unset) and the doctor load no module of the simulator, local mode or a dev-* stand-in; local mode does.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { type RunningSimulator, startSimulator } from '../../src/simulator/simulator';
import { writeClientsFile } from '../support/clients-file';
import { startGatewayProcess } from '../support/gateway-process';
import { runToExit } from '../support/run-to-exit';
import { tempDir } from '../support/temp-dir';
import { createTestPki, type TestPki } from '../support/test-certificates';

const ROOT = resolve(__dirname, '..', '..');
const USERNAME = 'prod-merchant';
const PASSWORD = 'prod-upstream-password-42';
const KEY = 'prod-client-key-0123456789abcdef';
const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';
const DEVELOPMENT_ONLY = /^src\/(simulator\/|dev-[^/]+\/|local-mode)/;

let pki: TestPki;
let upstream: RunningSimulator;
let clientsFile: string;
let dir: string;
let preload: string;

beforeAll(async () => {
  pki = await createTestPki();
  upstream = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD, tls: pki.good });
  clientsFile = writeClientsFile([{ id: 'prod-client', keys: [KEY], scopes: ['plans:read'] }]);
  dir = tempDir('loaded-modules-');
  preload = join(dir, 'record-loaded-modules.cjs');
  // Preloaded with --require: at exit, every module the process loaded (require.cache holds the import()ed ones too).
  writeFileSync(
    preload,
    "process.on('exit', () => require('node:fs').writeFileSync(process.env.LOADED_MODULES_FILE, JSON.stringify(Object.keys(require.cache))));\n",
  );
});

afterAll(async () => {
  await upstream?.close();
});

/** The environment that makes a process record its modules into a fresh file, and a reader of that file. */
function recording(name: string) {
  const file = join(dir, `${name}.json`);
  return {
    env: { NODE_OPTIONS: `--require ${preload}`, LOADED_MODULES_FILE: file },
    /** The project's own modules the process loaded, as paths from the repository root. */
    loaded: () =>
      (JSON.parse(readFileSync(file, 'utf8')) as string[])
        .map((path) => relative(ROOT, path))
        .filter((path) => path.startsWith('src/')),
  };
}

const productionEnv = () => ({
  UPSTREAM_BASE_URL: upstream.url,
  UPSTREAM_CA_FILE: pki.caFile,
  UPSTREAM_USERNAME: USERNAME,
  UPSTREAM_PASSWORD: PASSWORD,
  ALLOW_MEMORY_STORE: 'true',
  METRICS_PORT: '0',
  CLIENTS_FILE: clientsFile,
});

test('production start-up, a forwarded call and the drain load no simulator, local mode or dev-* module', async () => {
  const modules = recording('production');
  const gateway = await startGatewayProcess({ env: { ...productionEnv(), ...modules.env, NODE_ENV: '' } });
  let code: number | null;
  try {
    const answer = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
      headers: { 'x-api-key': KEY },
    });
    expect(answer.status).toBe(200);
  } finally {
    code = await gateway.stop();
  }
  expect(code).toBe(0);
  const loaded = modules.loaded();
  expect(loaded).toEqual(
    expect.arrayContaining(['src/main.ts', 'src/gateway.ts', 'src/forwarding/index.ts']),
  );
  expect(loaded.filter((path) => DEVELOPMENT_ONLY.test(path))).toEqual([]);
});

test('the doctor against a production upstream loads no simulator or local mode', async () => {
  const modules = recording('doctor');
  const { code, output } = await runToExit('src/operations/doctor-cli.ts', {
    ...productionEnv(),
    ...modules.env,
    HOST: '127.0.0.1',
    PORT: '0',
  });
  expect(output).toMatch(/✓ upstream token request/);
  expect(code).toBe(0);
  const loaded = modules.loaded();
  expect(loaded).toContain('src/operations/doctor.ts');
  expect(loaded.filter((path) => DEVELOPMENT_ONLY.test(path))).toEqual([]);
});

test('the recording sees what is loaded: local mode loads the simulator through its import()', async () => {
  const modules = recording('local');
  const gateway = await startGatewayProcess({ env: modules.env });
  expect(await gateway.stop()).toBe(0);
  expect(modules.loaded()).toEqual(
    expect.arrayContaining(['src/local-mode.ts', 'src/simulator/simulator.ts']),
  );
});
