// `npm run bench`: the gateway with every feature on (two provider accounts, a budget, a quota and the usage ledger
// included), side by side with the upstream called directly, a
// hand-written Express + http-proxy-middleware proxy (bench/bare-proxy.ts) and, when installed, nginx, against
// four upstreams: a minimal fast one (bench/lib/fast-upstream.ts), the simulator, the fast one over TLS, and the
// fast one answering after BENCH_SLOW_LATENCY_MS under BENCH_SLOW_CONNECTIONS callers (twice when pinned: the load
// generator beside the proxies, as everywhere, then on the slow upstream's CPU, "load apart").
//
//   npm run bench [-- --out FILE] [-- --profile] [-- --profile-dir DIR] [-- --keep] [-- --compare DIR]
//                 [-- --compare-plain] [-- --only fast,simulator,tls,slow] [-- --no-pin] [-- --no-parts]
//   BENCH_DURATION_SECONDS (5)  BENCH_ROUNDS (3)  BENCH_CONNECTIONS (32)  BENCH_RATE (500)
//   BENCH_FLEET_TTL_SECONDS (6)  BENCH_FLEET_LIFETIMES (4)  BENCH_WARMUP_SECONDS (2)
//   BENCH_SLOW_LATENCY_MS (150)  BENCH_SLOW_CONNECTIONS (1000)  BENCH_MAX_SOCKETS (the gateway's default)
//   BENCH_PROFILE_SCENARIO ('plan GET'): the load the --profile gateway runs under (fast upstream)
//   BENCH_PARTS_SLICES (4): 1 s slices of each load in the profile by part (--no-parts: none)
//
// The fast upstream also gets `gateway-plain` (one account, no budget, no quota, no ledger) beside `gateway` (the
// governed set-up) for the unique-id GET and the POST: gateway/bare for both set-ups and what governing adds per
// request, paired by round, read against the issue-40 promise (at most GOVERNING_CEILING_US). At the end a governed
// gateway is profiled under the same two loads and its CPU printed per request by part of the specification.
//
// --compare DIR adds a second gateway run from another checkout's build (DIR/dist, DIR/node_modules), e.g. a git
// worktree of main, as the target `compare`: the same settings, measured in the same rounds, paired with `gateway`.
//
// Every process is a child of this one, on 127.0.0.1, and is killed at the end, on error and on Ctrl-C.
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DEFAULT_UPSTREAM_MAX_SOCKETS } from '../src/config/env-schema';
import { DOCUMENT_BODY, envNumber, featuredGatewayEnv, PLAN_ID, ROOT, writeLoadClient } from './lib/fixtures';
import { checkGovernedAccounts, writeGovernedSetup } from './lib/governed-setup';
import { type LoadResult, type LoadSpec, median, runLoad } from './lib/load';
import {
  type CpuDelta,
  formatAgainstCeiling,
  formatComparison,
  formatCpuDelta,
  formatRatio,
  type PairedRatio,
  pairedComparison,
  pairedCpuDelta,
  pairedCpuExcess,
  pairedRatio,
  round,
} from './lib/paired';
import {
  alive,
  cpuTimeMs,
  httpOk,
  type Proc,
  pinCpus,
  pinProcess,
  rssMiB,
  type Served,
  startFastUpstream,
  startGatewayProcess,
  startRedis,
  startSimulatorProcess,
} from './lib/processes';
import { commandsPer1k, type RedisCommandCounter, redisCommandCounter } from './lib/redis-commands';
import { startBareProxy, startNginx, startStackProxy } from './lib/reference-proxies';
import { makeThrowawayCertificates } from './lib/throwaway-ca';
import {
  formatParts,
  formatProfile,
  profileWithin,
  readCpuProfile,
  summarizeCpuProfile,
  summarizeProfile,
} from './profile-summary';

const USERNAME = 'sandbox-merchant';
/** The unique-id GET's CPU added over the bare proxy minus the POST's: what a plan read costs beyond a validation. */
const GET_ONLY = 'GET-only (unique-id GET minus POST)';
const PASSWORD = 'sandbox-password';
const COALESCE_PLAN_ID = '3f2c9a1e-7b4d-4e8a-9c61-0d5e2f7a8b90';
/** Issue 40's promise: accounts, budget, quota and ledger together at most this much CPU per request over plain. */
const GOVERNING_CEILING_US = 10;
/** Trimmed at both ends of a profiled slice: the load generator opening and closing its connections. */
const SLICE_EDGE_US = 50_000;

const settings = {
  durationSeconds: envNumber('BENCH_DURATION_SECONDS', 5),
  rounds: envNumber('BENCH_ROUNDS', 3),
  /** New gateway processes (gateway, compare) at each round, warmed up again (BENCH_SAME_GATEWAYS=1: keep them). */
  freshGateways: process.env.BENCH_SAME_GATEWAYS !== '1',
  connections: envNumber('BENCH_CONNECTIONS', 32),
  rate: envNumber('BENCH_RATE', 500),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 2),
  slowLatencyMs: envNumber('BENCH_SLOW_LATENCY_MS', 150),
  slowConnections: envNumber('BENCH_SLOW_CONNECTIONS', 1000),
  /** Upstream sockets of both the gateway and the bare proxy: the gateway's default unless set. */
  maxSockets: envNumber('BENCH_MAX_SOCKETS', DEFAULT_UPSTREAM_MAX_SOCKETS),
  fleetTtlSeconds: envNumber('BENCH_FLEET_TTL_SECONDS', 6),
  fleetLifetimes: envNumber('BENCH_FLEET_LIFETIMES', 4),
  partsSlices: envNumber('BENCH_PARTS_SLICES', 4),
  fleetSkewSeconds: 2,
  fleetReplicas: 3,
  coalesceRequests: 100,
};
/** The slow scenario's two rows: the load generator beside the proxies, and apart from them (Kind.loadApart). */
const SLOW_NAME = `plan GET unique ids x${settings.slowConnections}`;
const SLOW_APART_NAME = `${SLOW_NAME}, load apart`;

const args = process.argv.slice(2);
const outFile = argValue('--out');
const profileDir = argValue('--profile-dir');
const profile = args.includes('--profile') || profileDir !== undefined;
const compareBuild = compareBuildDir(argValue('--compare'));
const keep = args.includes('--keep');
/** `--compare-plain`: the compared build gets the single-account set-up (a build from before provider accounts). */
const comparePlain = args.includes('--compare-plain');
const pinning = !args.includes('--no-pin');
/** `--no-parts`: skip the profile by part at the end. */
const profileParts = !args.includes('--no-parts');
const UPSTREAMS = ['fast', 'simulator', 'tls', 'slow'] as const;
type Upstream = (typeof UPSTREAMS)[number];
const only = upstreamsToRun(argValue('--only'));

/** How each upstream is named in the printout. */
const UPSTREAM_LABEL: Record<Upstream, string> = {
  fast: 'fast',
  simulator: 'simulator',
  tls: 'fast TLS',
  slow: `slow ${settings.slowLatencyMs}ms`,
};

/** `gateway`: the governed set-up; `gateway-plain`: the same build with one account, no budget, quota or ledger. */
type TargetName = 'direct' | 'bare-proxy' | 'stack-proxy' | 'gateway' | 'gateway-plain' | 'nginx' | 'compare';

interface Target {
  readonly name: TargetName;
  readonly upstream: Upstream;
  url: string;
  readonly headers: Record<string, string>;
  /** Processes whose CPU time is charged to this target (nginx: master and its worker). */
  cpu: () => number | null;
  /** The process whose resident memory is sampled. */
  pid: number;
  /** A gateway's own redis-server, to count its commands. */
  readonly redis?: RedisCommandCounter;
  /**
   * Gateways only: replaces the process with a fresh one of the same build and settings (same redis-server). Each
   * round measures new gateway processes: two processes of one build and one configuration were measured ~30 µs
   * apart per unique-id GET for their whole life (an A/A run), so a comparison of builds must not rest on one
   * process of each.
   */
  relaunch?: () => Promise<void>;
}

interface Kind {
  readonly name: string;
  readonly upstream: Upstream;
  readonly spec: (target: Target, durationSeconds: number) => LoadSpec;
  readonly targets: readonly TargetName[];
  /** Count upstream plan reads per request for the gateway (coalescing makes it < 1 under concurrency). */
  readonly upstreamCounter?: 'planReads' | 'validations';
  /**
   * Pinned runs only: the load generator (this process) moves to the upstream's CPU while this scenario runs, so the
   * proxy has its CPU to itself. The slow scenario's second row: what a proxy does to 1,000 calls in flight, apart
   * from its CPU per request shared with a load generator parsing its answers (the first row, and the fast rows).
   */
  readonly loadApart?: boolean;
}

interface Row {
  readonly name: string;
  readonly upstream: string;
  readonly target: string;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** p99 of the answered requests alone (the unanswered ones at the end left out, as before 2026-11-27, seventh). */
  readonly p99AnsweredMs: number;
  /** Requests unanswered at a run's end that had waited over a second by then (median over rounds). */
  readonly waitingOverSecond: number;
  readonly cpuMsPerRequest: number | null;
  readonly errors: number;
  /** 503 answers (UPSTREAM_SATURATED, or an open circuit), all rounds; they count among `errors` too. */
  readonly status503: number;
  /** Highest resident memory of the target process sampled during its runs, MiB. */
  readonly rssMiB: number | null;
  /** Redis commands per 1,000 requests (gateways only; from Redis' own INFO commandstats). */
  readonly redisCommandsPer1k: number | null;
  /** Each command's share of them, in the median round. */
  readonly redisCommandsPer1kByCommand?: Record<string, number>;
  /** Not in the JSON: upstream calls per request, shown in the table. */
  readonly upstreamPerRequest?: number;
}

interface Sample extends LoadResult {
  readonly cpuMsPerRequest: number | null;
  readonly upstreamPerRequest?: number;
  readonly rssMiB: number | null;
  readonly redis: { total: number; byCommand: Record<string, number> } | null;
}

interface Group {
  readonly upstream: Served;
  readonly targets: Target[];
  readonly procs: Proc[];
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'bff-bench-'));
  // Removed on every exit: success, error and Ctrl-C.
  if (!keep) process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
  const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
  const cpus = pinCpus(pinning);
  log(
    `node ${process.version}, ${settings.rounds} rounds of ${settings.durationSeconds}s, ` +
      `${settings.connections} connections, latency at ${settings.rate} req/s, upstreams ${only.join(', ')}, ` +
      (cpus
        ? `upstream pinned on CPU ${cpus.upstream}, everything else on ${cpus.rest}`
        : 'nothing pinned (--no-pin, one CPU or no taskset)') +
      `, temp ${tmp}`,
  );

  // --- the stacks: one upstream each, with its own gateway (own redis-server), bare proxy and anchors ----------
  const { apiKey, clientsFile } = writeLoadClient('bench');
  const callerHeaders = { 'x-api-key': apiKey };
  const redisCounters: RedisCommandCounter[] = [];
  /** `governed`: two provider accounts, a budget, a quota and the usage ledger on (writeGovernedSetup). */
  const gatewayEnv = async (
    name: string,
    upstream: string,
    extra: Record<string, string> = {},
    governed = false,
  ) => {
    const { proc: redis, url: redisUrl } = await startRedis(tmp);
    const counter = redisCommandCounter(redisUrl);
    redisCounters.push(counter);
    const credentials = { username: USERNAME, password: PASSWORD };
    const setup = governed ? writeGovernedSetup('bench', apiKey, upstream) : undefined;
    const env = featuredGatewayEnv(
      {
        upstream,
        ...credentials,
        redisUrl,
        clientsFile: setup?.clientsFile ?? clientsFile,
        accountsFile: setup?.accountsFile,
        logFile: join(tmp, `${name}.log`),
      },
      { SHUTDOWN_TIMEOUT_MS: '2000', UPSTREAM_MAX_SOCKETS: String(settings.maxSockets), ...extra },
    );
    return { env, redis, counter };
  };

  async function startGroup(
    upstream: Upstream,
    served: Served,
    options: {
      direct: boolean;
      nginx: boolean;
      stack?: boolean;
      /** Also the plain set-up (gateway-plain), between the bare proxy and the governed gateway. */
      plain?: boolean;
      extraEnv?: Record<string, string>;
    },
  ): Promise<Group> {
    const procs: Proc[] = [];
    const extra = options.extraEnv ?? {};
    const token = await login(served.url, extra.NODE_EXTRA_CA_CERTS);
    const g = await gatewayEnv(`gateway-${upstream}`, served.url, extra, true);
    procs.push(g.redis);
    const gateway = await gatewayTarget('gateway', upstream, g, procs);
    // Both accounts must log in at this upstream, or every row would count errors (and only coalescing would fail).
    await checkGovernedAccounts(gateway.url, callerHeaders);
    const targets: Target[] = [];
    if (options.direct)
      targets.push({
        name: 'direct',
        upstream,
        url: served.url,
        headers: { authorization: `Bearer ${token}` },
        cpu: () => cpuTimeMs(served.proc.pid),
        pid: served.proc.pid,
      });
    // The stack proxy before the bare one: stack, bare, gateway run back to back, so both pairs stay adjacent.
    if (options.stack) {
      const stack = await startStackProxy(`stack-proxy-${upstream}`, served.url, token, settings.maxSockets, {
        apiKey,
        logFile: join(tmp, `stack-proxy-${upstream}.log`),
        extraEnv: extra,
      });
      procs.push(stack.proc);
      targets.push({
        name: 'stack-proxy',
        upstream,
        url: stack.url,
        headers: callerHeaders,
        cpu: () => cpuTimeMs(stack.proc.pid),
        pid: stack.proc.pid,
      });
    }
    const bare = await startBareProxy(
      `bare-proxy-${upstream}`,
      served.url,
      token,
      settings.maxSockets,
      extra,
    );
    procs.push(bare.proc);
    targets.push({
      name: 'bare-proxy',
      upstream,
      url: bare.url,
      headers: callerHeaders,
      cpu: () => cpuTimeMs(bare.proc.pid),
      pid: bare.proc.pid,
    });
    // bare, plain, governed back to back: plain/bare and governed/plain adjacent, governed/bare one run apart.
    if (options.plain) {
      const p = await gatewayEnv(`gateway-plain-${upstream}`, served.url, extra, false);
      procs.push(p.redis);
      targets.push(await gatewayTarget('gateway-plain', upstream, p, procs));
    }
    targets.push(gateway);
    // Right after `gateway`, so the two builds run back to back in every round.
    if (compareBuild) {
      const c = await gatewayEnv(`compare-${upstream}`, served.url, extra, !comparePlain);
      procs.push(c.redis);
      targets.push(await gatewayTarget('compare', upstream, c, procs, compareBuild));
    }
    if (options.nginx) {
      const nginx = await startNginx(tmp, `nginx-${upstream}`, served.url, token);
      if (nginx) {
        procs.push(nginx.proc);
        targets.push({
          name: 'nginx',
          upstream,
          url: nginx.url,
          headers: callerHeaders,
          cpu: () => cpuTimeMs(nginx.proc.pid, true),
          pid: nginx.proc.pid,
        });
      } else log(`nginx is not on the PATH: the nginx anchor is skipped (${upstream})`);
    }
    procs.unshift(served.proc);
    return { upstream: served, targets, procs };
  }

  /** A gateway target that can be relaunched: `procs` always holds its running process. */
  async function gatewayTarget(
    name: 'gateway' | 'gateway-plain' | 'compare',
    upstream: Upstream,
    setup: { env: Record<string, string>; counter: RedisCommandCounter },
    procs: Proc[],
    build?: string,
  ): Promise<Target> {
    const launch = () => startGatewayProcess(`${name}-${upstream}`, setup.env, [], build);
    let running = await launch();
    procs.push(running.proc);
    const target: Target = {
      name,
      upstream,
      url: running.url,
      headers: callerHeaders,
      cpu: () => cpuTimeMs(running.proc.pid),
      pid: running.proc.pid,
      redis: setup.counter,
      relaunch: async () => {
        await running.proc.stop();
        const next = await launch();
        procs.splice(procs.indexOf(running.proc), 1, next.proc);
        running = next;
        target.url = next.url;
        target.pid = next.proc.pid;
      },
    };
    return target;
  }

  const groups = new Map<Upstream, Group>();
  // Long access tokens here: the bare proxy's static header must outlive the run (the fleet test uses short ones).
  const withSimulator = only.includes('simulator');
  if (only.includes('fast'))
    groups.set(
      'fast',
      await startGroup('fast', await startFastUpstream('fast-upstream', { cpus: cpus?.upstream }), {
        direct: true,
        nginx: true,
        stack: true,
        plain: true,
      }),
    );
  if (withSimulator)
    groups.set(
      'simulator',
      await startGroup('simulator', await startSimulator('simulator', 86_400, cpus?.upstream), {
        direct: true,
        nginx: true,
      }),
    );
  if (only.includes('tls')) {
    const tls = makeThrowawayCertificates(tmp);
    const tlsUpstream = await startFastUpstream('tls-upstream', { tls, cpus: cpus?.upstream });
    trustedCa.set(tlsUpstream.url, readFileSync(tls.caFile));
    groups.set(
      'tls',
      await startGroup('tls', tlsUpstream, {
        direct: false,
        nginx: false,
        // The gateway and the bare proxy trust the throwaway CA; verification stays on.
        extraEnv: { NODE_EXTRA_CA_CERTS: tls.caFile },
      }),
    );
  }
  if (only.includes('slow'))
    groups.set(
      'slow',
      await startGroup(
        'slow',
        await startFastUpstream('slow-upstream', { latencyMs: settings.slowLatencyMs, cpus: cpus?.upstream }),
        { direct: false, nginx: false },
      ),
    );
  const targetsOf = (kind: Kind) =>
    (groups.get(kind.upstream)?.targets ?? []).filter((t) => kind.targets.includes(t.name));
  /** Runs `work` with the load generator where `kind` wants it, and back on the shared CPUs after. */
  const withLoadPlaced = async <T>(kind: Kind, work: () => Promise<T>): Promise<T> => {
    if (!kind.loadApart || !cpus) return work();
    pinProcess(process.pid, cpus.upstream);
    try {
      return await work();
    } finally {
      pinProcess(process.pid, cpus.rest);
    }
  };

  const ALL: TargetName[] = ['direct', 'bare-proxy', 'stack-proxy', 'gateway', 'compare', 'nginx'];
  // The plain set-up only where the issue reads it: the unique-id GET and the POST (its group: the fast upstream).
  const WITH_PLAIN: TargetName[] = [...ALL, 'gateway-plain'];
  const planGet = (upstream: Upstream): Kind => ({
    name: 'plan GET',
    upstream,
    targets: ALL,
    upstreamCounter: 'planReads',
    spec: (t, d) => ({
      url: `${t.url}/api/subscriptions/plan/${PLAN_ID}`,
      method: 'GET',
      headers: t.headers,
      durationSeconds: d,
      connections: settings.connections,
    }),
  });
  // Every read a different (unknown) plan: nothing to coalesce, each request is one upstream call (404).
  const uniqueGet = (upstream: Upstream, connections = settings.connections): Kind => ({
    name: 'plan GET unique ids',
    upstream,
    targets: WITH_PLAIN,
    upstreamCounter: 'planReads',
    spec: (t, d) => ({
      url: t.url,
      pathFor: () => `/api/subscriptions/plan/${randomUUID()}`,
      method: 'GET',
      headers: t.headers,
      durationSeconds: d,
      connections,
      expectStatus: 404,
    }),
  });
  const post = (upstream: Upstream): Kind => ({
    name: 'validation POST',
    upstream,
    targets: WITH_PLAIN,
    upstreamCounter: 'validations',
    spec: (t, d) => ({
      url: `${t.url}/api/validation/document`,
      method: 'POST',
      headers: { ...t.headers, 'content-type': 'application/json' },
      body: DOCUMENT_BODY,
      durationSeconds: d,
      connections: settings.connections,
    }),
  });
  const atRate = (upstream: Upstream): Kind => ({
    name: `plan GET @${settings.rate}rps`,
    upstream,
    targets: ['direct', 'bare-proxy', 'gateway'],
    upstreamCounter: 'planReads',
    spec: (t, d) => ({
      url: `${t.url}/api/subscriptions/plan/${PLAN_ID}`,
      method: 'GET',
      headers: t.headers,
      durationSeconds: d,
      connections: 8,
      overallRate: settings.rate,
    }),
  });
  const kinds: Kind[] = [
    planGet('fast'),
    uniqueGet('fast'),
    post('fast'),
    atRate('fast'),
    uniqueGet('simulator'),
    post('simulator'),
    uniqueGet('tls'),
    post('tls'),
    { ...uniqueGet('slow', settings.slowConnections), name: SLOW_NAME },
    ...(cpus
      ? [{ ...uniqueGet('slow', settings.slowConnections), name: SLOW_APART_NAME, loadApart: true }]
      : []),
  ].filter((kind) => groups.has(kind.upstream));

  // --- warm-up: JIT, keep-alive pools, the gateway's token and rate-limit scripts -------------------------
  for (const kind of kinds)
    for (const target of targetsOf(kind))
      await withLoadPlaced(kind, () => runLoad(kind.spec(target, settings.warmupSeconds)));

  // --- interleaved rounds -----------------------------------------------------------------------------------
  const keyOf = (kind: Kind, target: TargetName) => `${kind.upstream}\u0000${kind.name}\u0000${target}`;
  const samples = new Map<string, Sample[]>();
  for (let round = 0; round < settings.rounds; round++) {
    if (round > 0 && settings.freshGateways) await relaunchGateways(kinds, targetsOf, withLoadPlaced);
    for (const kind of kinds) {
      // A B C, then C B A, ...: no target always runs first or last.
      const order = targetsOf(kind);
      if (round % 2 === 1) order.reverse();
      for (const target of order) {
        const upstreamUrl = groups.get(kind.upstream)?.upstream.url ?? '';
        const sample = await withLoadPlaced(kind, () => measure(kind, target, upstreamUrl));
        samples.set(keyOf(kind, target.name), [...(samples.get(keyOf(kind, target.name)) ?? []), sample]);
        log(
          `round ${round + 1}/${settings.rounds} ${UPSTREAM_LABEL[kind.upstream].padEnd(11)} ` +
            `${kind.name.padEnd(24)} ${target.name.padEnd(13)} ` +
            `${sample.rps.toFixed(0).padStart(6)} req/s  p50 ${sample.p50Ms.toFixed(2)} ms  ` +
            `p99 ${sample.p99Ms.toFixed(2)} ms (answers ${sample.p99AnsweredMs.toFixed(2)})  ` +
            `waiting >1 s at the end ${sample.waitingOverSecond}  errors ${sample.errors}  503s ${sample.status503}`,
        );
        for (const group of groups.values())
          for (const proc of group.procs)
            if (!alive(proc)) throw new Error(`${proc.name} died:\n${proc.output()}`);
      }
    }
  }

  const rows: Row[] = [];
  for (const kind of kinds)
    for (const target of targetsOf(kind)) {
      const list = samples.get(keyOf(kind, target.name)) ?? [];
      const upstream = list.map((s) => s.upstreamPerRequest ?? Number.NaN);
      const rss = list.map((s) => s.rssMiB ?? Number.NaN).filter(Number.isFinite);
      rows.push({
        name: kind.name,
        upstream: UPSTREAM_LABEL[kind.upstream],
        target: target.name,
        rps: round(median(list.map((s) => s.rps)), 1),
        p50Ms: round(median(list.map((s) => s.p50Ms)), 3),
        p99Ms: round(median(list.map((s) => s.p99Ms)), 3),
        p99AnsweredMs: round(median(list.map((s) => s.p99AnsweredMs)), 3),
        waitingOverSecond: median(list.map((s) => s.waitingOverSecond)),
        cpuMsPerRequest: nullable(median(list.map((s) => s.cpuMsPerRequest ?? Number.NaN)), 4),
        errors: list.reduce((sum, s) => sum + s.errors, 0),
        status503: list.reduce((sum, s) => sum + s.status503, 0),
        rssMiB: rss.length > 0 ? round(Math.max(...rss), 1) : null,
        redisCommandsPer1k: nullable(median(list.map((s) => s.redis?.total ?? Number.NaN)), 2),
        redisCommandsPer1kByCommand: medianSample(list, (s) => s.redis?.total)?.redis?.byCommand,
        upstreamPerRequest: Number.isFinite(median(upstream)) ? round(median(upstream), 3) : undefined,
      });
    }
  const find = (upstream: Upstream, name: string, target: string) =>
    rows.find((r) => r.upstream === UPSTREAM_LABEL[upstream] && r.name === name && r.target === target);
  // Ratios are paired: the two targets of a round run back to back, so a slow moment of the shared machine weighs
  // on both; the median over rounds is the ratio, with the range of the rounds beside it. The ratio of the two
  // median throughputs (which may come from different rounds) is reported too.
  const kindOf = (upstream: Upstream, prefix: string) =>
    kinds.find((k) => k.upstream === upstream && k.name.startsWith(prefix));
  const pairIn = (kind: Kind | undefined, a: TargetName, b: TargetName): PairedRatio | null =>
    kind ? pairedRatio(samples.get(keyOf(kind, a)) ?? [], samples.get(keyOf(kind, b)) ?? []) : null;
  const pair = (upstream: Upstream, prefix: string, a: TargetName, b: TargetName) =>
    pairIn(kindOf(upstream, prefix), a, b);
  const slowKind = kinds.find((k) => k.name === SLOW_NAME);
  const slowApartKind = kinds.find((k) => k.name === SLOW_APART_NAME);
  const ratioDetails = {
    fast: {
      gatewayOverBareGetUniqueIds: pair('fast', 'plan GET unique ids', 'gateway', 'bare-proxy'),
      gatewayOverBarePost: pair('fast', 'validation POST', 'gateway', 'bare-proxy'),
      gatewayOverBareGet: pair('fast', 'plan GET', 'gateway', 'bare-proxy'),
      gatewayOverDirectGet: pair('fast', 'plan GET', 'gateway', 'direct'),
      // The required stack alone against the bare proxy: a ceiling for the gateway's own ratio (issue 32).
      stackOverBareGetUniqueIds: pair('fast', 'plan GET unique ids', 'stack-proxy', 'bare-proxy'),
      stackOverBarePost: pair('fast', 'validation POST', 'stack-proxy', 'bare-proxy'),
      gatewayOverStackGetUniqueIds: pair('fast', 'plan GET unique ids', 'gateway', 'stack-proxy'),
      gatewayOverStackPost: pair('fast', 'validation POST', 'gateway', 'stack-proxy'),
      plainOverBareGetUniqueIds: pair('fast', 'plan GET unique ids', 'gateway-plain', 'bare-proxy'),
      plainOverBarePost: pair('fast', 'validation POST', 'gateway-plain', 'bare-proxy'),
    },
    simulator: {
      gatewayOverBareGetUniqueIds: pair('simulator', 'plan GET unique ids', 'gateway', 'bare-proxy'),
      gatewayOverBarePost: pair('simulator', 'validation POST', 'gateway', 'bare-proxy'),
    },
    tls: {
      gatewayOverBareGetUniqueIds: pair('tls', 'plan GET unique ids', 'gateway', 'bare-proxy'),
      gatewayOverBarePost: pair('tls', 'validation POST', 'gateway', 'bare-proxy'),
    },
    slow: {
      gatewayOverBareThroughput: pairIn(slowKind, 'gateway', 'bare-proxy'),
      gatewayOverBareThroughputLoadApart: pairIn(slowApartKind, 'gateway', 'bare-proxy'),
    },
  };
  // The CPU the gateway's features cost per request, the budget a throughput ratio hides: paired like the ratios.
  const cpuOverIn = (kind: Kind | undefined, target: TargetName = 'gateway'): CpuDelta | null =>
    kind
      ? pairedCpuDelta(samples.get(keyOf(kind, target)) ?? [], samples.get(keyOf(kind, 'bare-proxy')) ?? [])
      : null;
  const cpuOver = (upstream: Upstream, prefix: string, target: TargetName = 'gateway') =>
    cpuOverIn(kindOf(upstream, prefix), target);
  // What the read costs beyond the validation (issue 32): the unique-id GET's CPU added minus the POST's, per round.
  const getOnly = (upstream: Upstream): CpuDelta | null => {
    const get = kindOf(upstream, 'plan GET unique ids');
    const post = kindOf(upstream, 'validation POST');
    const of = (kind: Kind | undefined, target: TargetName) =>
      (kind && samples.get(keyOf(kind, target))) ?? [];
    return get && post
      ? pairedCpuExcess(
          of(get, 'gateway'),
          of(get, 'bare-proxy'),
          of(post, 'gateway'),
          of(post, 'bare-proxy'),
        )
      : null;
  };
  const cpuAddedOverBare = {
    fast: {
      'plan GET unique ids': cpuOver('fast', 'plan GET unique ids'),
      'validation POST': cpuOver('fast', 'validation POST'),
      [GET_ONLY]: getOnly('fast'),
      'stack proxy, plan GET unique ids': cpuOver('fast', 'plan GET unique ids', 'stack-proxy'),
      'stack proxy, validation POST': cpuOver('fast', 'validation POST', 'stack-proxy'),
      'plain gateway, plan GET unique ids': cpuOver('fast', 'plan GET unique ids', 'gateway-plain'),
      'plain gateway, validation POST': cpuOver('fast', 'validation POST', 'gateway-plain'),
    },
    tls: {
      'plan GET unique ids': cpuOver('tls', 'plan GET unique ids'),
      'validation POST': cpuOver('tls', 'validation POST'),
      [GET_ONLY]: getOnly('tls'),
    },
    slow: {
      'plan GET unique ids': cpuOverIn(slowKind),
      'plan GET unique ids, load apart': cpuOverIn(slowApartKind),
    },
  };
  // What governing costs (issue 40): the governed gateway's CPU per request minus the plain one's, same build, paired.
  const governedOverPlain = (prefix: string): CpuDelta | null => {
    const kind = kindOf('fast', prefix);
    return kind
      ? pairedCpuDelta(
          samples.get(keyOf(kind, 'gateway')) ?? [],
          samples.get(keyOf(kind, 'gateway-plain')) ?? [],
        )
      : null;
  };
  const governing = {
    'plan GET unique ids': governedOverPlain('plan GET unique ids'),
    'validation POST': governedOverPlain('validation POST'),
  };
  /** gateway/bare p99 of a scenario, of the medians over rounds (`p99AnsweredMs`: the answered requests alone). */
  const p99Ratio = (kind: Kind | undefined, field: 'p99Ms' | 'p99AnsweredMs' = 'p99Ms'): number | null => {
    const g = kind && find(kind.upstream, kind.name, 'gateway')?.[field];
    const b = kind && find(kind.upstream, kind.name, 'bare-proxy')?.[field];
    return g !== undefined && b !== undefined && b > 0 ? round(g / b, 3) : null;
  };
  const slowP99Ratios = {
    '': { all: p99Ratio(slowKind), answered: p99Ratio(slowKind, 'p99AnsweredMs') },
    ', load apart': { all: p99Ratio(slowApartKind), answered: p99Ratio(slowApartKind, 'p99AnsweredMs') },
  };
  const medianOf = (r: PairedRatio | null) => r?.median ?? null;
  const ratios = {
    fast: Object.fromEntries(Object.entries(ratioDetails.fast).map(([k, r]) => [k, medianOf(r)])),
    simulator: Object.fromEntries(Object.entries(ratioDetails.simulator).map(([k, r]) => [k, medianOf(r)])),
    tls: Object.fromEntries(Object.entries(ratioDetails.tls).map(([k, r]) => [k, medianOf(r)])),
    slow: {
      gatewayOverBareThroughput: medianOf(ratioDetails.slow.gatewayOverBareThroughput),
      gatewayOverBareP99: slowP99Ratios[''].all,
      gatewayOverBareThroughputLoadApart: medianOf(ratioDetails.slow.gatewayOverBareThroughputLoadApart),
      gatewayOverBareP99LoadApart: slowP99Ratios[', load apart'].all,
      gatewayOverBareP99Answered: slowP99Ratios[''].answered,
      gatewayOverBareP99AnsweredLoadApart: slowP99Ratios[', load apart'].answered,
    },
  };
  const latencyName = `plan GET @${settings.rate}rps`;
  const added = {
    p50Ms: round(
      (find('fast', latencyName, 'gateway')?.p50Ms ?? 0) - (find('fast', latencyName, 'direct')?.p50Ms ?? 0),
      3,
    ),
    p99Ms: round(
      (find('fast', latencyName, 'gateway')?.p99Ms ?? 0) - (find('fast', latencyName, 'direct')?.p99Ms ?? 0),
      3,
    ),
  };
  const comparison = compareBuild
    ? Object.fromEntries(
        kinds.map((kind) => [
          `${UPSTREAM_LABEL[kind.upstream]}: ${kind.name}`,
          pairedComparison(
            samples.get(keyOf(kind, 'compare')) ?? [],
            samples.get(keyOf(kind, 'gateway')) ?? [],
          ),
        ]),
      )
    : undefined;

  // --- 100 identical plan reads at once on one gateway: one upstream call (the simulator can be slowed) -------
  const simulatorGroup = groups.get('simulator');
  const coalescingGateway = simulatorGroup?.targets.find((t) => t.name === 'gateway');
  const coalescing =
    simulatorGroup && coalescingGateway
      ? await coalesce(simulatorGroup.upstream.url, coalescingGateway.url, callerHeaders)
      : undefined;
  if (coalescing)
    log(`coalescing: ${coalescing.requests} requests -> ${coalescing.upstreamCalls} upstream call(s)`);

  const mainGateway = (groups.get('fast') ?? groups.values().next().value)?.targets.find(
    (t) => t.name === 'gateway',
  );
  const metricsOk = mainGateway ? await httpOk(`${mainGateway.url}/metrics`).catch(() => false) : false;
  const logBytes = [...groups.keys()].reduce((sum, upstream) => {
    const file = join(tmp, `gateway-${upstream}.log`);
    return sum + (existsSync(file) ? statSync(file).size : 0);
  }, 0);

  // --- optional profile of a gateway under one of the loads against the fast upstream ------------------------
  let profileText: string | undefined;
  const profileKind = kinds.find(
    (k) => k.upstream === 'fast' && k.name === (process.env.BENCH_PROFILE_SCENARIO || 'plan GET'),
  );
  const fastUpstream = groups.get('fast')?.upstream;
  if (profile && fastUpstream)
    profileText = await profileGateway(tmp, fastUpstream.url, gatewayEnv, callerHeaders, profileKind);
  // --- by default: the governed gateway profiled under the unique-id GET and the POST, by part ---------------
  const partLoads = [
    { label: 'GET', kind: kindOf('fast', 'plan GET unique ids') },
    { label: 'POST', kind: kindOf('fast', 'validation POST') },
  ].flatMap(({ label, kind }) => (kind ? [{ label, kind }] : []));
  const partsText =
    profileParts && fastUpstream && partLoads.length > 0
      ? await profileByPart(tmp, fastUpstream.url, gatewayEnv, callerHeaders, partLoads, cpus)
      : undefined;

  await Promise.all(redisCounters.map((c) => c.close()));
  for (const group of groups.values()) await Promise.all(group.procs.map((p) => p.stop()));

  // --- a fleet of replicas over several short token lifetimes (on simulators, with the simulator scenarios) ----
  const tokens = withSimulator ? await fleet(gatewayEnv, callerHeaders, cpus?.upstream) : undefined;
  if (tokens)
    log(
      `fleet: ${tokens.replicas} replicas, ${tokens.seconds}s, access TTL ${tokens.accessTtlSeconds}s: ` +
        `${tokens.logins} login(s), ${tokens.refreshes} refresh(es), ${tokens.errors} request errors`,
    );

  const report = {
    node: process.version,
    pinned: cpus ?? null,
    /** The scenarios run with the load generator on the upstream's CPU (Kind.loadApart). */
    loadApart: kinds.filter((k) => k.loadApart).map((k) => `${UPSTREAM_LABEL[k.upstream]} ${k.name}`),
    scenarios: rows.map(({ upstreamPerRequest: _omit, ...row }) => row),
    ratios,
    /** Per ratio: median, min and max over rounds, and the ratio of the median throughputs. */
    ratioDetails,
    /** CPU µs per request of the gateway (of the stack proxy where named) minus the bare proxy's, paired by round. */
    cpuAddedOverBare,
    /** CPU µs per request of the governed gateway minus the plain one (fast upstream), paired by round. */
    governingOverPlain: { ceilingUs: GOVERNING_CEILING_US, ...governing },
    tokens: tokens
      ? {
          replicas: tokens.replicas,
          seconds: tokens.seconds,
          accessTtlSeconds: tokens.accessTtlSeconds,
          logins: tokens.logins,
          refreshes: tokens.refreshes,
        }
      : null,
    coalescing: coalescing ?? null,
    ...(comparison ? { comparison: { build: compareBuild, scenarios: comparison } } : {}),
  };
  process.stdout.write(
    formatReport(rows, ratioDetails, slowP99Ratios, cpuAddedOverBare, governing, added, tokens, coalescing, {
      nginx: rows.some((r) => r.target === 'nginx'),
      logBytes,
      metricsOk,
      pinned: cpus,
      loadApart: slowApartKind !== undefined,
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
    process.stdout.write(
      `\nGateway CPU profile under the "${profileKind?.name}" load (fast upstream)\n${profileText}\n`,
    );
  if (partsText) process.stdout.write(`\n${partsText}\n`);
  if (outFile) {
    writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);
    log(`wrote ${outFile}`);
  }
  if (keep) log(`kept ${tmp}`);
}

// --- measuring ----------------------------------------------------------------------------------------------

/** New processes for the gateways of every scenario, each warmed up on every scenario it runs, as at the start. */
async function relaunchGateways(
  kinds: readonly Kind[],
  targetsOf: (kind: Kind) => Target[],
  placed: <T>(kind: Kind, work: () => Promise<T>) => Promise<T>,
): Promise<void> {
  const relaunched = new Set<Target>();
  for (const kind of kinds)
    for (const target of targetsOf(kind))
      if (target.relaunch && !relaunched.has(target)) {
        relaunched.add(target);
        await target.relaunch();
      }
  for (const kind of kinds)
    for (const target of targetsOf(kind))
      if (relaunched.has(target))
        await placed(kind, () => runLoad(kind.spec(target, settings.warmupSeconds)));
}

async function measure(kind: Kind, target: Target, upstreamUrl: string): Promise<Sample> {
  const before = target.cpu();
  const statsBefore = kind.upstreamCounter ? await simulatorStats(upstreamUrl) : undefined;
  const redisBefore = await target.redis?.calls();
  // Resident memory sampled through the run (a /proc read every 250 ms); the highest sample is kept.
  let rss = rssMiB(target.pid);
  const sampler = setInterval(() => {
    const now = rssMiB(target.pid);
    if (now !== null && (rss === null || now > rss)) rss = now;
  }, 250);
  const result = await runLoad(kind.spec(target, settings.durationSeconds)).finally(() =>
    clearInterval(sampler),
  );
  const after = target.cpu();
  const redisAfter = await target.redis?.calls();
  const statsAfter = kind.upstreamCounter ? await simulatorStats(upstreamUrl) : undefined;
  const counter = kind.upstreamCounter;
  const upstreamCalls =
    counter && statsBefore && statsAfter ? statsAfter[counter] - statsBefore[counter] : undefined;
  return {
    ...result,
    cpuMsPerRequest:
      before !== null && after !== null && result.responses > 0 ? (after - before) / result.responses : null,
    upstreamPerRequest:
      upstreamCalls !== undefined && result.responses > 0 ? upstreamCalls / result.responses : undefined,
    rssMiB: rss,
    // Steady state: the gateway was warmed up and its token cached before any measured run.
    redis:
      redisBefore !== undefined && redisAfter !== undefined && result.responses > 0
        ? commandsPer1k(redisBefore, redisAfter, result.responses)
        : null,
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
  gatewayEnv: GatewayEnvFactory,
  headers: Record<string, string>,
  upstreamCpus: string | undefined,
): Promise<FleetResult> {
  const ttl = settings.fleetTtlSeconds;
  const simulator = await startSimulator('fleet-simulator', ttl, upstreamCpus);
  const startedAt = performance.now();
  const replicas: Served[] = [];
  // One redis-server for the whole fleet: the replicas share their tokens through it.
  const { env, redis, counter } = await gatewayEnv('fleet-gateway', simulator.url, {
    REDIS_KEY_PREFIX: 'bench-fleet:',
    TOKEN_REFRESH_SKEW_SECONDS: String(settings.fleetSkewSeconds),
  });
  try {
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
    await Promise.all([simulator.proc.stop(), counter.close()]);
    await redis.stop();
  }
}

type GatewayEnvFactory = (
  name: string,
  upstream: string,
  extra?: Record<string, string>,
  governed?: boolean,
) => Promise<{ env: Record<string, string>; redis: Proc; counter: RedisCommandCounter }>;

async function profileGateway(
  tmp: string,
  upstreamUrl: string,
  gatewayEnv: GatewayEnvFactory,
  headers: Record<string, string>,
  kind: Kind | undefined,
): Promise<string> {
  if (!kind) return '';
  const dir = profileDir ? resolve(profileDir) : join(tmp, 'profile');
  mkdirSync(dir, { recursive: true });
  const before = new Set(readdirSync(dir));
  const { env, redis, counter } = await gatewayEnv('profiled-gateway', upstreamUrl);
  const profiled = await startGatewayProcess('profiled-gateway', env, [
    '--cpu-prof',
    `--cpu-prof-dir=${dir}`,
  ]);
  const target = profiledTarget(profiled, headers);
  const warmup = await runLoad(kind.spec(target, settings.warmupSeconds));
  const load = await runLoad(kind.spec(target, Math.max(settings.durationSeconds, 10)));
  await profiled.proc.stop(15_000); // SIGTERM: a clean exit writes the .cpuprofile
  await counter.close();
  await redis.stop();
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile') && !before.has(f));
  if (!file) return '(no .cpuprofile was written)';
  const requests = warmup.responses + load.responses; // the profile covers both
  return `${join(dir, file)}\n${formatProfile(summarizeProfile(join(dir, file), 15, requests))}`;
}

/** A profiled gateway as a load target against the fast upstream (its CPU is read from its profile, not here). */
function profiledTarget(profiled: Served, headers: Record<string, string>): Target {
  return {
    name: 'gateway',
    upstream: 'fast',
    url: profiled.url,
    headers,
    cpu: () => null,
    pid: profiled.proc.pid,
  };
}

/**
 * The governed gateway (as `gateway` runs) profiled under each load in turn, 1 s slices alternating, every sample
 * charged to the load of its slice (as bench/sliced-profile.ts does), then its CPU per request by part. With pinning,
 * the gateway has its CPUs alone meanwhile (this process, the upstream and its Redis on the upstream's CPU): the
 * profile is then its own CPU time, not also the moments the load generator ran in the middle of its work.
 */
async function profileByPart(
  tmp: string,
  upstreamUrl: string,
  gatewayEnv: GatewayEnvFactory,
  headers: Record<string, string>,
  loads: ReadonlyArray<{ label: string; kind: Kind }>,
  cpus: { upstream: string; rest: string } | undefined,
): Promise<string> {
  const dir = join(tmp, 'profile-parts');
  mkdirSync(dir, { recursive: true });
  if (cpus) pinProcess(process.pid, cpus.upstream); // this process and the children it starts from now on
  try {
    const { env, redis, counter } = await gatewayEnv('parts-gateway', upstreamUrl, {}, true);
    const profiled = await startGatewayProcess('parts-gateway', env, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
    if (cpus) pinProcess(profiled.proc.pid, cpus.rest);
    const target = profiledTarget(profiled, headers);
    const windows = new Map<string, { fromUs: number; toUs: number }[]>(loads.map((l) => [l.label, []]));
    const requests = new Map<string, number>(loads.map((l) => [l.label, 0]));
    try {
      for (const { kind } of loads) await runLoad(kind.spec(target, settings.warmupSeconds));
      for (let i = 0; i < settings.partsSlices; i++)
        for (const { label, kind } of i % 2 === 0 ? loads : [...loads].reverse()) {
          const from = nowUs();
          const result = await runLoad(kind.spec(target, 1));
          const to = nowUs();
          const kept = Math.max(0, (to - from - 2 * SLICE_EDGE_US) / (to - from));
          windows.get(label)?.push({ fromUs: from + SLICE_EDGE_US, toUs: to - SLICE_EDGE_US });
          requests.set(label, (requests.get(label) ?? 0) + result.responses * kept);
        }
    } finally {
      await profiled.proc.stop(15_000); // SIGTERM: a clean exit writes the .cpuprofile
      await counter.close();
      await redis.stop();
    }
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) return 'profile by part: no .cpuprofile was written';
    const whole = readCpuProfile(join(dir, file));
    const columns = loads.map(({ label }) => ({
      label,
      summary: summarizeCpuProfile(profileWithin(whole, windows.get(label) ?? []), 15, requests.get(label)),
    }));
    const counts = columns.map((c) => `${(c.summary.requests ?? 0).toFixed(0)} ${c.label}s`).join(', ');
    return [
      `Where the governed gateway's CPU goes, by part: µs per request (fast upstream; ${settings.partsSlices} slices of 1 s of each load, alternating, ${counts} profiled; ` +
        `${cpus ? 'the gateway alone on its CPU' : 'not pinned'}; each sample counts for the innermost part on its stack)`,
      formatParts(columns),
    ].join('\n');
  } finally {
    if (cpus) pinProcess(process.pid, cpus.rest);
  }
}

/** The monotonic clock V8 stamps profile samples with, µs. */
function nowUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

// --- processes --------------------------------------------------------------------------------------------

/** The simulator with the default sandbox credentials and `accessTtlSeconds` access tokens. */
function startSimulator(name: string, accessTtlSeconds: number, cpus?: string): Promise<Served> {
  return startSimulatorProcess(
    name,
    {
      SIMULATOR_ACCESS_TTL_SECONDS: String(accessTtlSeconds),
      SIMULATOR_REFRESH_TTL_SECONDS: '86400',
    },
    cpus,
  );
}

// --- HTTP helpers (loopback only) -------------------------------------------------------------------------

/** A token for the bare proxy and `direct`; the fast upstreams accept any, so the TLS one is not asked. */
async function login(simulatorUrl: string, caFile?: string): Promise<string> {
  if (caFile) return 'bench-static-token';
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

/** Upstream counters (the simulator's, or the fast upstream's under the same names). */
async function simulatorStats(upstreamUrl: string): Promise<SimulatorCounters> {
  const ca = trustedCa.get(upstreamUrl);
  if (!ca) return (await (await fetch(`${upstreamUrl}/__simulator/stats`)).json()) as SimulatorCounters;
  // The throwaway CA is trusted for this request only (this process's fetch does not know it).
  return new Promise((resolveStats, reject) => {
    const req = httpsRequest(`${upstreamUrl}/__simulator/stats`, { ca, agent: false }, (res) => {
      let text = '';
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.once('end', () => resolveStats(JSON.parse(text) as SimulatorCounters));
    });
    req.once('error', reject);
    req.end();
  });
}

/** The CA each https upstream's certificate chains to. */
const trustedCa = new Map<string, Buffer>();

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
  ratios: Record<Upstream, Record<string, PairedRatio | null>>,
  /** gateway/bare p99 of the slow rows, by the suffix of their label: every request's wait, and the answers alone. */
  slowP99Ratios: Record<string, { all: number | null; answered: number | null }>,
  cpuAdded: Partial<Record<Upstream, Record<string, CpuDelta | null>>>,
  governing: Record<string, CpuDelta | null>,
  added: { p50Ms: number; p99Ms: number },
  tokens: FleetResult | undefined,
  coalescing: { requests: number; upstreamCalls: number } | undefined,
  notes: {
    nginx: boolean;
    logBytes: number;
    metricsOk: boolean;
    pinned?: { upstream: string; rest: string };
    /** The slow row with the load generator apart ran (pinned runs with the slow upstream). */
    loadApart: boolean;
  },
): string {
  const header = [
    'upstream',
    'scenario',
    'target',
    'req/s',
    'p50 ms',
    'p99 ms',
    'waiting >1 s',
    'CPU ms/req',
    'RSS MiB',
    'errors',
    '503s',
    'redis/1k',
    'upstream/req',
  ];
  const texts = 3;
  const body = rows.map((r) => [
    r.upstream,
    r.name,
    r.target,
    r.rps.toFixed(0),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    String(r.waitingOverSecond),
    r.cpuMsPerRequest === null ? '-' : r.cpuMsPerRequest.toFixed(3),
    r.rssMiB === null ? '-' : r.rssMiB.toFixed(0),
    String(r.errors),
    String(r.status503),
    r.redisCommandsPer1k === null ? '-' : r.redisCommandsPer1k.toFixed(1),
    r.upstreamPerRequest === undefined ? '-' : r.upstreamPerRequest.toFixed(2),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (i < texts ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  const ratioLines = (Object.keys(ratios) as Upstream[]).flatMap((upstream) =>
    Object.entries(ratios[upstream])
      .filter(([, r]) => r !== null)
      .map(
        ([key, r]) =>
          `  ${`${UPSTREAM_LABEL[upstream]}: ${RATIO_LABEL[key] ?? key}`.padEnd(48)} ${formatRatio(r)}`,
      ),
  );
  const out = [
    '',
    `Node ${process.version}; medians of ${settings.rounds} interleaved rounds of ${settings.durationSeconds}s; ` +
      `${settings.connections} connections (pipelining 1), latency row at ${settings.rate} req/s; ` +
      `slow upstream: ${settings.slowLatencyMs} ms, ${settings.slowConnections} connections ` +
      `(at most ${Math.floor((settings.slowConnections * 1000) / settings.slowLatencyMs)} req/s); ` +
      `${settings.maxSockets} upstream sockets for the gateway and the reference proxies`,
    notes.pinned
      ? `pinned: the upstream on CPU ${notes.pinned.upstream}; load generator, proxies and Redis on ${notes.pinned.rest}` +
        (notes.loadApart
          ? ` (the slow row "load apart": the load generator on CPU ${notes.pinned.upstream}, beside the slow upstream)`
          : '')
      : 'not pinned',
    'p50/p99: the wait of every request, those unanswered when a run stopped at what they had waited by then; waiting ' +
      '>1 s: of those, the ones that had waited over a second (median of rounds: callers a proxy left unserved)',
    'CPU ms/req: user+system time of the target process (direct: the upstream itself); RSS: highest sample during ' +
      'its runs; redis/1k: Redis commands per 1,000 requests (INFO commandstats of its own redis-server)',
    '',
    line(header),
    `|${widths.map((w, i) => (i < texts ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...body.map(line),
    '',
    'ratios (median of the per-round ratios [lowest-highest round]; ratio of the median req/s):',
    ...ratioLines,
    ...Object.entries(slowP99Ratios).flatMap(([suffix, { all, answered }]) =>
      all === null
        ? []
        : [
            `  ${`slow: gateway/bare p99${suffix} (of medians)`.padEnd(48)} ${all.toFixed(3)}` +
              (answered === null ? '' : `; of the answers alone ${answered.toFixed(3)}`),
          ],
    ),
    'CPU added per request over the bare proxy, by the gateway unless the stack proxy is named (µs, median of the per-round differences [lowest to highest]):',
    ...Object.entries(cpuAdded).flatMap(([upstream, scenarios]) =>
      Object.entries(scenarios ?? {}).flatMap(([scenario, cpu]) =>
        cpu
          ? [`  ${`${UPSTREAM_LABEL[upstream as Upstream]}: ${scenario}`.padEnd(48)} ${formatCpuDelta(cpu)}`]
          : [],
      ),
    ),
    ...(Object.values(governing).some((cpu) => cpu !== null)
      ? [
          `governing (two accounts, budget, quota, ledger): CPU µs per request of gateway minus gateway-plain, same build, paired by round (issue 40 promise: at most ${GOVERNING_CEILING_US} µs):`,
          ...Object.entries(governing).map(
            ([scenario, cpu]) =>
              `  ${`fast: ${scenario}`.padEnd(48)} ${formatAgainstCeiling(cpu, GOVERNING_CEILING_US)}`,
          ),
        ]
      : []),
    `added by the gateway over direct at ${settings.rate} req/s (fast upstream): p50 ${added.p50Ms.toFixed(2)} ms, p99 ${added.p99Ms.toFixed(2)} ms`,
    tokens
      ? `tokens: ${tokens.replicas} replicas for ${tokens.seconds}s with ${tokens.accessTtlSeconds}s access tokens ` +
        `(refresh skew ${settings.fleetSkewSeconds}s): ${tokens.logins} login(s) + ${tokens.refreshes} refresh(es) ` +
        `(${(tokens.seconds / tokens.accessTtlSeconds).toFixed(1)} lifetimes; ${tokens.errors} request errors)`
      : 'tokens: skipped (needs the simulator upstream)',
    coalescing
      ? `coalescing: ${coalescing.requests} concurrent identical plan reads -> ${coalescing.upstreamCalls} upstream call(s)`
      : 'coalescing: skipped (needs the simulator upstream)',
    `gateway features on: API key auth, Redis rate limit, token cache in Redis (encrypted), two provider accounts, ` +
      `a budget and a day quota (not binding), the usage ledger, info request log ` +
      `(${(notes.logBytes / 1024 / 1024).toFixed(1)} MiB written), metrics (${notes.metricsOk ? 'served' : 'NOT served'}); ` +
      'gateway-plain (fast upstream): the same with one account and no budget, quota or ledger',
    notes.nginx ? '' : 'nginx: not on the PATH, anchor skipped',
    '',
  ];
  return out.join('\n');
}

const RATIO_LABEL: Record<string, string> = {
  gatewayOverBareGetUniqueIds: 'gateway/bare plan GET unique ids',
  gatewayOverBarePost: 'gateway/bare validation POST',
  gatewayOverBareGet: 'gateway/bare plan GET (coalesced)',
  gatewayOverDirectGet: 'gateway/direct plan GET',
  gatewayOverBareThroughput: 'gateway/bare throughput',
  gatewayOverBareThroughputLoadApart: 'gateway/bare throughput, load apart',
  stackOverBareGetUniqueIds: 'stack/bare plan GET unique ids',
  stackOverBarePost: 'stack/bare validation POST',
  gatewayOverStackGetUniqueIds: 'gateway/stack plan GET unique ids',
  gatewayOverStackPost: 'gateway/stack validation POST',
  plainOverBareGetUniqueIds: 'gateway-plain/bare plan GET unique ids',
  plainOverBarePost: 'gateway-plain/bare validation POST',
};

/** `--only fast,tls`: the upstreams to measure (all by default). */
function upstreamsToRun(list: string | undefined): Upstream[] {
  if (list === undefined) return [...UPSTREAMS];
  const names = list.split(',').map((n) => n.trim());
  const unknown = names.filter((n) => !(UPSTREAMS as readonly string[]).includes(n));
  if (unknown.length > 0 || names.length === 0)
    throw new Error(`bench: --only takes a comma list of ${UPSTREAMS.join(', ')}; not ${unknown.join(', ')}`);
  return names as Upstream[];
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

/** The sample at the median of `value` (the lower middle one of an even count), if any has a value. */
function medianSample<T>(list: readonly T[], value: (item: T) => number | undefined): T | undefined {
  const valued = list.filter((item) => value(item) !== undefined);
  valued.sort((a, b) => (value(a) as number) - (value(b) as number));
  return valued[Math.floor((valued.length - 1) / 2)];
}

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
