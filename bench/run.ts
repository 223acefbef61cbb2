// `npm run bench`: the gateway with every feature on, side by side with the simulator called directly, a
// hand-written Express + http-proxy-middleware proxy (bench/bare-proxy.ts) and, when installed, nginx.
//
//   npm run bench [-- --out FILE] [-- --profile] [-- --profile-dir DIR] [-- --keep] [-- --compare DIR]
//   BENCH_DURATION_SECONDS (5)  BENCH_ROUNDS (3)  BENCH_CONNECTIONS (32)  BENCH_RATE (500)
//   BENCH_FLEET_TTL_SECONDS (6)  BENCH_FLEET_LIFETIMES (4)  BENCH_WARMUP_SECONDS (2)
//   BENCH_PROFILE_SCENARIO ('plan GET'): the load the --profile gateway runs under
//
// --compare DIR adds a second gateway run from another checkout's build (DIR/dist, DIR/node_modules), e.g. a git
// worktree of main, as the target `compare`: the same settings, measured in the same rounds, paired with `gateway`.
//
// Every process is a child of this one, on 127.0.0.1, and is killed at the end, on error and on Ctrl-C.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import {
  DOCUMENT_BODY,
  envNumber,
  featuredGatewayEnv,
  NODE,
  PLAN_ID,
  ROOT,
  writeLoadClient,
} from './lib/fixtures';
import { type LoadResult, type LoadSpec, median, runLoad } from './lib/load';
import {
  formatComparison,
  formatRatio,
  type PairedRatio,
  pairedComparison,
  pairedRatio,
  round,
} from './lib/paired';
import {
  alive,
  cpuTimeMs,
  freePort,
  httpOk,
  type Served,
  start,
  startGatewayProcess,
  startRedis,
  startSimulatorProcess,
  waitFor,
} from './lib/processes';
import { formatProfile, summarizeProfile } from './profile-summary';

const USERNAME = 'sandbox-merchant';
const PASSWORD = 'sandbox-password';
const COALESCE_PLAN_ID = '3f2c9a1e-7b4d-4e8a-9c61-0d5e2f7a8b90';

const settings = {
  durationSeconds: envNumber('BENCH_DURATION_SECONDS', 5),
  rounds: envNumber('BENCH_ROUNDS', 3),
  connections: envNumber('BENCH_CONNECTIONS', 32),
  rate: envNumber('BENCH_RATE', 500),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 2),
  fleetTtlSeconds: envNumber('BENCH_FLEET_TTL_SECONDS', 6),
  fleetLifetimes: envNumber('BENCH_FLEET_LIFETIMES', 4),
  fleetSkewSeconds: 2,
  fleetReplicas: 3,
  coalesceRequests: 100,
};

const args = process.argv.slice(2);
const outFile = argValue('--out');
const profileDir = argValue('--profile-dir');
const profile = args.includes('--profile') || profileDir !== undefined;
const compareBuild = compareBuildDir(argValue('--compare'));
const keep = args.includes('--keep');

interface Target {
  readonly name: 'direct' | 'bare-proxy' | 'gateway' | 'nginx' | 'compare';
  readonly url: string;
  readonly headers: Record<string, string>;
  /** Processes whose CPU time is charged to this target (nginx: master and its worker). */
  readonly cpu: () => number | null;
}

interface Kind {
  readonly name: string;
  readonly spec: (target: Target, durationSeconds: number) => LoadSpec;
  readonly targets: readonly Target['name'][];
  /** Count simulator plan reads per request for the gateway (coalescing makes it < 1 under concurrency). */
  readonly upstreamCounter?: 'planReads' | 'validations';
}

interface Row {
  readonly name: string;
  readonly target: string;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly cpuMsPerRequest: number | null;
  readonly errors: number;
  /** Not in the JSON: upstream calls per request, shown in the table. */
  readonly upstreamPerRequest?: number;
}

interface Sample extends LoadResult {
  readonly cpuMsPerRequest: number | null;
  readonly upstreamPerRequest?: number;
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'bff-bench-'));
  // Removed on every exit: success, error and Ctrl-C.
  if (!keep) process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
  const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
  log(
    `node ${process.version}, ${settings.rounds} rounds of ${settings.durationSeconds}s, ` +
      `${settings.connections} connections, latency at ${settings.rate} req/s, temp ${tmp}`,
  );

  // --- the stack ------------------------------------------------------------------------------------------
  const { proc: redis, url: redisUrl } = await startRedis(tmp);

  // Long access tokens here: the bare proxy's static header must outlive the run (the fleet test uses short ones).
  const simulator = await startSimulator('simulator', 86_400);
  const accessToken = await login(simulator.url);

  const { apiKey, clientsFile } = writeLoadClient('bench');
  const logFile = join(tmp, 'gateway.log');
  const gatewayEnv = (upstream: string, extra: Record<string, string> = {}) =>
    featuredGatewayEnv(
      { upstream, username: USERNAME, password: PASSWORD, redisUrl, clientsFile, logFile },
      { SHUTDOWN_TIMEOUT_MS: '2000', ...extra },
    );

  const gateway = await startGatewayProcess(
    'gateway',
    gatewayEnv(simulator.url, { REDIS_KEY_PREFIX: 'bench:' }),
  );
  const compare = compareBuild
    ? await startGatewayProcess(
        'compare',
        gatewayEnv(simulator.url, { REDIS_KEY_PREFIX: 'bench-compare:' }),
        [],
        compareBuild,
      )
    : undefined;
  const bare = await startBareProxy(simulator.url, accessToken);
  const nginx = await startNginx(tmp, simulator.url, accessToken);
  if (!nginx) log('nginx is not on the PATH: the nginx anchor is skipped');

  const callerHeaders = { 'x-api-key': apiKey };
  const targets: Target[] = [
    {
      name: 'direct',
      url: simulator.url,
      headers: { authorization: `Bearer ${accessToken}` },
      cpu: () => cpuTimeMs(simulator.proc.pid),
    },
    { name: 'bare-proxy', url: bare.url, headers: callerHeaders, cpu: () => cpuTimeMs(bare.proc.pid) },
    { name: 'gateway', url: gateway.url, headers: callerHeaders, cpu: () => cpuTimeMs(gateway.proc.pid) },
  ];
  if (nginx)
    targets.push({
      name: 'nginx',
      url: nginx.url,
      headers: callerHeaders,
      cpu: () => cpuTimeMs(nginx.proc.pid, true),
    });
  // Right after `gateway`, so the two builds run back to back in every round.
  if (compare)
    targets.splice(targets.findIndex((t) => t.name === 'gateway') + 1, 0, {
      name: 'compare',
      url: compare.url,
      headers: callerHeaders,
      cpu: () => cpuTimeMs(compare.proc.pid),
    });
  const all = targets.map((t) => t.name);

  const kinds: Kind[] = [
    {
      name: 'plan GET',
      targets: all,
      upstreamCounter: 'planReads',
      spec: (t, d) => ({
        url: `${t.url}/api/subscriptions/plan/${PLAN_ID}`,
        method: 'GET',
        headers: t.headers,
        durationSeconds: d,
        connections: settings.connections,
      }),
    },
    {
      // Every read a different (unknown) plan: nothing to coalesce, each request is one upstream call (404).
      name: 'plan GET unique ids',
      targets: all,
      upstreamCounter: 'planReads',
      spec: (t, d) => ({
        url: t.url,
        pathFor: () => `/api/subscriptions/plan/${randomUUID()}`,
        method: 'GET',
        headers: t.headers,
        durationSeconds: d,
        connections: settings.connections,
        expectStatus: 404,
      }),
    },
    {
      name: 'validation POST',
      targets: all,
      upstreamCounter: 'validations',
      spec: (t, d) => ({
        url: `${t.url}/api/validation/document`,
        method: 'POST',
        headers: { ...t.headers, 'content-type': 'application/json' },
        body: DOCUMENT_BODY,
        durationSeconds: d,
        connections: settings.connections,
      }),
    },
    {
      name: `plan GET @${settings.rate}rps`,
      targets: all.filter((n) => n !== 'nginx' && n !== 'compare'),
      upstreamCounter: 'planReads',
      spec: (t, d) => ({
        url: `${t.url}/api/subscriptions/plan/${PLAN_ID}`,
        method: 'GET',
        headers: t.headers,
        durationSeconds: d,
        connections: 8,
        overallRate: settings.rate,
      }),
    },
  ];

  // --- warm-up: JIT, keep-alive pools, the gateway's token and rate-limit scripts -------------------------
  for (const kind of kinds)
    for (const target of targets.filter((t) => kind.targets.includes(t.name)))
      await runLoad(kind.spec(target, settings.warmupSeconds));

  // --- interleaved rounds -----------------------------------------------------------------------------------
  const samples = new Map<string, Sample[]>();
  for (let round = 0; round < settings.rounds; round++) {
    for (const kind of kinds) {
      // A B C, then C B A, ...: no target always runs first or last.
      const order = targets.filter((t) => kind.targets.includes(t.name));
      if (round % 2 === 1) order.reverse();
      for (const target of order) {
        const sample = await measure(kind, target, simulator.url);
        const key = `${kind.name}\u0000${target.name}`;
        samples.set(key, [...(samples.get(key) ?? []), sample]);
        log(
          `round ${round + 1}/${settings.rounds} ${kind.name.padEnd(18)} ${target.name.padEnd(10)} ` +
            `${sample.rps.toFixed(0).padStart(6)} req/s  p50 ${sample.p50Ms.toFixed(2)} ms  ` +
            `p99 ${sample.p99Ms.toFixed(2)} ms  errors ${sample.errors}`,
        );
        for (const proc of [simulator.proc, gateway.proc, bare.proc, ...(compare ? [compare.proc] : [])])
          if (!alive(proc)) throw new Error(`${proc.name} died:\n${proc.output()}`);
      }
    }
  }

  const rows: Row[] = [];
  for (const kind of kinds)
    for (const target of targets.filter((t) => kind.targets.includes(t.name))) {
      const list = samples.get(`${kind.name}\u0000${target.name}`) ?? [];
      const upstream = list.map((s) => s.upstreamPerRequest ?? Number.NaN);
      rows.push({
        name: kind.name,
        target: target.name,
        rps: round(median(list.map((s) => s.rps)), 1),
        p50Ms: round(median(list.map((s) => s.p50Ms)), 3),
        p99Ms: round(median(list.map((s) => s.p99Ms)), 3),
        cpuMsPerRequest: nullable(median(list.map((s) => s.cpuMsPerRequest ?? Number.NaN)), 4),
        errors: list.reduce((sum, s) => sum + s.errors, 0),
        upstreamPerRequest: Number.isFinite(median(upstream)) ? round(median(upstream), 3) : undefined,
      });
    }
  const find = (name: string, target: string) => rows.find((r) => r.name === name && r.target === target);
  // Ratios are paired: the two targets of a round run back to back, so a slow moment of the shared machine weighs
  // on both; the median over rounds is the ratio, with the range of the rounds beside it. The ratio of the two
  // median throughputs (which may come from different rounds) is reported too.
  const pair = (name: string, a: Target['name'], b: Target['name']): PairedRatio | null =>
    pairedRatio(samples.get(`${name}\u0000${a}`) ?? [], samples.get(`${name}\u0000${b}`) ?? []);
  const paired = {
    gatewayOverBareGet: pair('plan GET', 'gateway', 'bare-proxy'),
    gatewayOverBarePost: pair('validation POST', 'gateway', 'bare-proxy'),
    gatewayOverDirectGet: pair('plan GET', 'gateway', 'direct'),
    gatewayOverBareGetUniqueIds: pair('plan GET unique ids', 'gateway', 'bare-proxy'),
  };
  const comparison = compare
    ? Object.fromEntries(
        kinds
          .filter((kind) => kind.targets.includes('compare'))
          .map((kind) => [
            kind.name,
            pairedComparison(
              samples.get(`${kind.name}\u0000compare`) ?? [],
              samples.get(`${kind.name}\u0000gateway`) ?? [],
            ),
          ]),
      )
    : undefined;
  const ratios = {
    gatewayOverBareGet: paired.gatewayOverBareGet?.median ?? null,
    gatewayOverBarePost: paired.gatewayOverBarePost?.median ?? null,
    gatewayOverDirectGet: paired.gatewayOverDirectGet?.median ?? null,
  };
  const latencyName = kinds[kinds.length - 1]?.name ?? '';
  const added = {
    p50Ms: round((find(latencyName, 'gateway')?.p50Ms ?? 0) - (find(latencyName, 'direct')?.p50Ms ?? 0), 3),
    p99Ms: round((find(latencyName, 'gateway')?.p99Ms ?? 0) - (find(latencyName, 'direct')?.p99Ms ?? 0), 3),
  };

  // --- 100 identical plan reads at once on one gateway: one upstream call -----------------------------------
  const coalescing = await coalesce(simulator.url, gateway.url, callerHeaders);
  log(`coalescing: ${coalescing.requests} requests -> ${coalescing.upstreamCalls} upstream call(s)`);

  const logBytes = existsSync(logFile) ? statSync(logFile).size : 0;
  const metricsOk = await httpOk(`${gateway.url}/metrics`).catch(() => false);

  // --- optional profile of a gateway under the GET load -----------------------------------------------------
  let profileText: string | undefined;
  const profileKind = kinds.find((k) => k.name === (process.env.BENCH_PROFILE_SCENARIO || 'plan GET'));
  if (profile) profileText = await profileGateway(tmp, simulator.url, gatewayEnv, callerHeaders, profileKind);

  await Promise.all([gateway.proc.stop(), bare.proc.stop(), nginx?.proc.stop(), compare?.proc.stop()]);

  // --- a fleet of replicas over several short token lifetimes ----------------------------------------------
  const tokens = await fleet(gatewayEnv, callerHeaders);
  log(
    `fleet: ${tokens.replicas} replicas, ${tokens.seconds}s, access TTL ${tokens.accessTtlSeconds}s: ` +
      `${tokens.logins} login(s), ${tokens.refreshes} refresh(es), ${tokens.errors} request errors`,
  );

  await Promise.all([simulator.proc.stop(), redis.stop()]);

  const report = {
    node: process.version,
    scenarios: rows.map(({ upstreamPerRequest: _omit, ...row }) => row),
    ratios,
    /** Per ratio: median, min and max over rounds, and the ratio of the median throughputs. */
    ratioDetails: paired,
    tokens: {
      replicas: tokens.replicas,
      seconds: tokens.seconds,
      accessTtlSeconds: tokens.accessTtlSeconds,
      logins: tokens.logins,
      refreshes: tokens.refreshes,
    },
    coalescing,
    ...(comparison ? { comparison: { build: compareBuild, scenarios: comparison } } : {}),
  };
  process.stdout.write(
    formatReport(rows, paired, added, tokens, coalescing, {
      nginx: Boolean(nginx),
      logBytes,
      metricsOk,
    }),
  );
  if (comparison)
    process.stdout.write(
      [
        `\ncompare (${compareBuild}) against gateway (${ROOT}), paired by round:`,
        ...Object.entries(comparison).map(([scenario, c]) => formatComparison(scenario, c)),
        '',
      ].join('\n'),
    );
  if (profileText)
    process.stdout.write(`\nGateway CPU profile under the "${profileKind?.name}" load\n${profileText}\n`);
  if (outFile) {
    writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);
    log(`wrote ${outFile}`);
  }
  if (keep) log(`kept ${tmp}`);
}

// --- measuring ----------------------------------------------------------------------------------------------

async function measure(kind: Kind, target: Target, simulatorUrl: string): Promise<Sample> {
  const before = target.cpu();
  const statsBefore = kind.upstreamCounter ? await simulatorStats(simulatorUrl) : undefined;
  const result = await runLoad(kind.spec(target, settings.durationSeconds));
  const after = target.cpu();
  const statsAfter = kind.upstreamCounter ? await simulatorStats(simulatorUrl) : undefined;
  const counter = kind.upstreamCounter;
  const upstreamCalls =
    counter && statsBefore && statsAfter ? statsAfter[counter] - statsBefore[counter] : undefined;
  return {
    ...result,
    cpuMsPerRequest:
      before !== null && after !== null && result.responses > 0 ? (after - before) / result.responses : null,
    upstreamPerRequest:
      upstreamCalls !== undefined && result.responses > 0 ? upstreamCalls / result.responses : undefined,
  };
}

async function coalesce(
  simulatorUrl: string,
  gatewayUrl: string,
  headers: Record<string, string>,
): Promise<{ requests: number; upstreamCalls: number }> {
  await post(`${simulatorUrl}/__simulator/reset`, '');
  // A slow upstream makes the burst overlap for sure: every read arrives while the first is in flight.
  await post(`${simulatorUrl}/__simulator/faults`, JSON.stringify({ latencyMs: 500 }));
  try {
    const statuses = await Promise.all(
      Array.from({ length: settings.coalesceRequests }, () =>
        get(`${gatewayUrl}/api/subscriptions/plan/${COALESCE_PLAN_ID}`, headers),
      ),
    );
    const failed = statuses.filter((s) => s !== 200).length;
    if (failed > 0) throw new Error(`coalescing: ${failed} of ${statuses.length} reads failed`);
    const stats = await simulatorStats(simulatorUrl);
    return { requests: settings.coalesceRequests, upstreamCalls: stats.planReads };
  } finally {
    await post(`${simulatorUrl}/__simulator/faults`, '{}');
  }
}

interface FleetResult {
  replicas: number;
  seconds: number;
  accessTtlSeconds: number;
  logins: number;
  refreshes: number;
  errors: number;
}

async function fleet(
  gatewayEnv: (upstream: string, extra?: Record<string, string>) => Record<string, string>,
  headers: Record<string, string>,
): Promise<FleetResult> {
  const ttl = settings.fleetTtlSeconds;
  const simulator = await startSimulator('fleet-simulator', ttl);
  const startedAt = performance.now();
  const replicas: Served[] = [];
  try {
    const env = gatewayEnv(simulator.url, {
      REDIS_KEY_PREFIX: 'bench-fleet:',
      TOKEN_REFRESH_SKEW_SECONDS: String(settings.fleetSkewSeconds),
    });
    // A cold fleet starting at once: single flight across replicas should cost one login.
    replicas.push(
      ...(await Promise.all(
        Array.from({ length: settings.fleetReplicas }, (_, i) =>
          startGatewayProcess(`fleet-gateway-${i + 1}`, env),
        ),
      )),
    );
    const loadSeconds = Math.max(
      1,
      Math.round(ttl * settings.fleetLifetimes - (performance.now() - startedAt) / 1000),
    );
    const results = await Promise.all(
      replicas.map((replica) =>
        runLoad({
          url: `${replica.url}/api/subscriptions/plan/${PLAN_ID}`,
          method: 'GET',
          headers,
          durationSeconds: loadSeconds,
          connections: 2,
          overallRate: 20,
        }),
      ),
    );
    const stats = await simulatorStats(simulator.url);
    return {
      replicas: settings.fleetReplicas,
      seconds: round((performance.now() - startedAt) / 1000, 1),
      accessTtlSeconds: ttl,
      logins: stats.logins,
      refreshes: stats.refreshes,
      errors: results.reduce((sum, r) => sum + r.errors, 0),
    };
  } finally {
    await Promise.all(replicas.map((r) => r.proc.stop()));
    await simulator.proc.stop();
  }
}

async function profileGateway(
  tmp: string,
  simulatorUrl: string,
  gatewayEnv: (upstream: string, extra?: Record<string, string>) => Record<string, string>,
  headers: Record<string, string>,
  kind: Kind | undefined,
): Promise<string> {
  if (!kind) return '';
  const dir = profileDir ? resolve(profileDir) : join(tmp, 'profile');
  mkdirSync(dir, { recursive: true });
  const before = new Set(readdirSync(dir));
  const profiled = await startGatewayProcess(
    'profiled-gateway',
    gatewayEnv(simulatorUrl, { REDIS_KEY_PREFIX: 'bench-profile:' }),
    ['--cpu-prof', `--cpu-prof-dir=${dir}`],
  );
  const target: Target = { name: 'gateway', url: profiled.url, headers, cpu: () => null };
  const warmup = await runLoad(kind.spec(target, settings.warmupSeconds));
  const load = await runLoad(kind.spec(target, Math.max(settings.durationSeconds, 10)));
  await profiled.proc.stop(15_000); // SIGTERM: a clean exit writes the .cpuprofile
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile') && !before.has(f));
  if (!file) return '(no .cpuprofile was written)';
  const requests = warmup.responses + load.responses; // the profile covers both
  return `${join(dir, file)}\n${formatProfile(summarizeProfile(join(dir, file), 15, requests))}`;
}

// --- processes --------------------------------------------------------------------------------------------

/** The simulator with the default sandbox credentials and `accessTtlSeconds` access tokens. */
function startSimulator(name: string, accessTtlSeconds: number): Promise<Served> {
  return startSimulatorProcess(name, {
    SIMULATOR_ACCESS_TTL_SECONDS: String(accessTtlSeconds),
    SIMULATOR_REFRESH_TTL_SECONDS: '86400',
  });
}

async function startBareProxy(target: string, token: string): Promise<Served> {
  const port = await freePort();
  const proc = start('bare-proxy', NODE, [join(ROOT, 'dist/bench/bare-proxy.js')], {
    cwd: ROOT,
    env: { BARE_PORT: String(port), BARE_TARGET: target, BARE_TOKEN: token },
  });
  const url = `http://127.0.0.1:${port}`;
  // Any HTTP answer means it serves (an unknown path is the simulator's 404, proxied).
  await waitFor('bare-proxy', async () => (await fetch(`${url}/__simulator/stats`)).status > 0, proc);
  return { proc, url };
}

function onPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, command);
    if (dir && existsSync(candidate)) return candidate;
  }
  for (const dir of ['/usr/sbin', '/usr/local/sbin', '/usr/local/nginx/sbin']) {
    if (existsSync(join(dir, command))) return join(dir, command);
  }
  return undefined;
}

async function startNginx(tmp: string, target: string, token: string): Promise<Served | undefined> {
  const binary = onPath('nginx');
  if (!binary) return undefined;
  const port = await freePort();
  const prefix = join(tmp, 'nginx');
  mkdirSync(prefix, { recursive: true });
  const upstream = new URL(target);
  const conf = join(prefix, 'nginx.conf');
  writeFileSync(
    conf,
    `daemon off;
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${prefix}/client_body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  upstream simulator {
    server ${upstream.hostname}:${upstream.port};
    keepalive 64;
    # Below Node's 5 s server keep-alive (the gateway's agent does the same): nginx's default of 60 s reuses
    # connections the simulator has just closed, and answers those requests 502.
    keepalive_timeout 4s;
  }
  # Like Node's servers, no limit on requests per caller connection (nginx closes one every 1000 by default, and
  # a request the load generator sends as it closes fails).
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://simulator;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer ${token}";
    }
  }
}
`,
  );
  const proc = start('nginx', binary, ['-p', prefix, '-c', conf, '-e', `${prefix}/error.log`]);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor('nginx', async () => (await fetch(`${url}/__simulator/stats`)).status > 0, proc, 10_000);
  } catch (error) {
    process.stderr.write(`bench: nginx did not start, skipping it: ${(error as Error).message}\n`);
    await proc.stop();
    return undefined;
  }
  return { proc, url };
}

// --- HTTP helpers (loopback only) -------------------------------------------------------------------------

async function login(simulatorUrl: string): Promise<string> {
  const response = await fetch(`${simulatorUrl}/api/token/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: USERNAME, password: PASSWORD }),
  });
  if (!response.ok) throw new Error(`bench: simulator login answered ${response.status}`);
  return ((await response.json()) as { access: string }).access;
}

interface SimulatorCounters {
  planReads: number;
  validations: number;
  logins: number;
  refreshes: number;
}

async function simulatorStats(simulatorUrl: string): Promise<SimulatorCounters> {
  const response = await fetch(`${simulatorUrl}/__simulator/stats`);
  return (await response.json()) as SimulatorCounters;
}

async function post(url: string, body: string): Promise<void> {
  const response = await fetch(url, {
    method: 'POST',
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body || undefined,
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`bench: POST ${url} answered ${response.status}`);
}

/** One GET on its own connection (no pooling: the burst must really arrive at once). */
function get(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolveStatus, reject) => {
    const req = request(url, { headers, agent: false }, (res) => {
      res.resume();
      res.once('end', () => resolveStatus(res.statusCode ?? 0));
    });
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.once('error', reject);
    req.end();
  });
}

// --- output -----------------------------------------------------------------------------------------------

function formatReport(
  rows: Row[],
  ratios: Record<string, PairedRatio | null>,
  added: { p50Ms: number; p99Ms: number },
  tokens: FleetResult,
  coalescing: { requests: number; upstreamCalls: number },
  notes: { nginx: boolean; logBytes: number; metricsOk: boolean },
): string {
  const header = ['scenario', 'target', 'req/s', 'p50 ms', 'p99 ms', 'CPU ms/req', 'errors', 'upstream/req'];
  const body = rows.map((r) => [
    r.name,
    r.target,
    r.rps.toFixed(0),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    r.cpuMsPerRequest === null ? '-' : r.cpuMsPerRequest.toFixed(3),
    String(r.errors),
    r.upstreamPerRequest === undefined ? '-' : r.upstreamPerRequest.toFixed(2),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (i < 2 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  const out = [
    '',
    `Node ${process.version}; medians of ${settings.rounds} interleaved rounds of ${settings.durationSeconds}s; ` +
      `${settings.connections} connections (pipelining 1), latency row at ${settings.rate} req/s`,
    'CPU ms/req: user+system time of the target process (direct: the simulator itself)',
    '',
    line(header),
    `|${widths.map((w, i) => (i < 2 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...body.map(line),
    '',
    'ratios (median of the per-round ratios [lowest-highest round]; ratio of the median req/s):',
    ...[
      ['gateway/bare plan GET', ratios.gatewayOverBareGet],
      ['gateway/bare plan GET unique ids', ratios.gatewayOverBareGetUniqueIds],
      ['gateway/bare validation POST', ratios.gatewayOverBarePost],
      ['gateway/direct plan GET', ratios.gatewayOverDirectGet],
    ].map(([label, r]) => `  ${String(label).padEnd(34)} ${formatRatio(r as PairedRatio | null)}`),
    `added by the gateway over direct at ${settings.rate} req/s: p50 ${added.p50Ms.toFixed(2)} ms, p99 ${added.p99Ms.toFixed(2)} ms`,
    `tokens: ${tokens.replicas} replicas for ${tokens.seconds}s with ${tokens.accessTtlSeconds}s access tokens ` +
      `(refresh skew ${settings.fleetSkewSeconds}s): ${tokens.logins} login(s) + ${tokens.refreshes} refresh(es) ` +
      `(${(tokens.seconds / tokens.accessTtlSeconds).toFixed(1)} lifetimes; ${tokens.errors} request errors)`,
    `coalescing: ${coalescing.requests} concurrent identical plan reads -> ${coalescing.upstreamCalls} upstream call(s)`,
    `gateway features on: API key auth, Redis rate limit, token cache in Redis (encrypted), info request log ` +
      `(${(notes.logBytes / 1024 / 1024).toFixed(1)} MiB written), metrics (${notes.metricsOk ? 'served' : 'NOT served'})`,
    notes.nginx ? '' : 'nginx: not on the PATH, anchor skipped',
    '',
  ];
  return out.join('\n');
}

// --- comparing two builds ------------------------------------------------------------------------------------

/** The checkout `--compare` names, checked before anything starts. */
function compareBuildDir(dir: string | undefined): string | undefined {
  if (dir === undefined) return undefined;
  const build = resolve(dir);
  for (const needed of ['dist/src/main.js', 'node_modules'])
    if (!existsSync(join(build, needed)))
      throw new Error(`bench: --compare ${dir}: no ${needed} there (run npm ci and npm run build in it)`);
  return build;
}

// --- small things -----------------------------------------------------------------------------------------

function nullable(value: number, digits: number): number | null {
  return Number.isFinite(value) ? round(value, digits) : null;
}

function argValue(flag: string): string | undefined {
  const i = args.indexOf(flag);
  if (i < 0) return undefined;
  const value = args[i + 1];
  if (!value || value.startsWith('--')) throw new Error(`bench: ${flag} needs a value`);
  return value;
}

main().catch((error: unknown) => {
  process.stderr.write(
    `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
