// GET against POST in one profiled gateway: unique-id plan GETs and validation POSTs alternate in 1 s slices (2 s with
// --slow) against the fast upstream, and every CPU sample is charged to the load of its slice, so both loads see the
// same machine (two profiles taken minutes apart on a shared machine differ by more than the two requests do).
//   npm run build && node dist/bench/sliced-profile.js [BUILD_DIR]   (BUILD_DIR: another checkout's build; default this)
//   BENCH_SLICES (12) slices of each load; --bare profiles the bare proxy instead of the gateway, --stack the
//   stack proxy (the bare one plus the required libraries); --governed runs the
//   gateway as `npm run bench` does (two provider accounts, a budget, a quota, the usage ledger: writeGovernedSetup);
//   --versus profiles two gateways of the build side by side, plain and governed, their slices interleaved, and
//   prints what governing costs per request by feature (governed minus plain). --alone keeps the load generator,
//   the upstream and Redis on the last CPU and the profiled process(es) on the others (--versus: the two gateways
//   share them, one serving at a time): the profile is then the process's CPU time, not CPU time plus the moments
//   the load generator ran in the middle of one of its socket writes. Needs taskset and at least 2 CPUs.
//   --slow: the slow scenario's load instead (the upstream answers after BENCH_SLOW_LATENCY_MS, 150, to
//   BENCH_SLOW_CONNECTIONS, 1000, callers; slices of 2 s): where the CPU goes with that many calls in flight.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DOCUMENT_BODY, envNumber, featuredGatewayEnv, ROOT, writeLoadClient } from './lib/fixtures';
import { writeGovernedSetup } from './lib/governed-setup';
import { type LoadSpec, runLoad } from './lib/load';
import {
  pinCpus,
  pinProcess,
  type Served,
  startFastUpstream,
  startGatewayProcess,
  startRedis,
} from './lib/processes';
import { startBareProxy, startStackProxy } from './lib/reference-proxies';
import { type ProfileSummary, profileWithin, readCpuProfile, summarizeCpuProfile } from './profile-summary';

type Load = 'GET' | 'POST';
interface Slice {
  readonly load: Load;
  readonly fromUs: number;
  readonly toUs: number;
  readonly responses: number;
}

const SLICES = envNumber('BENCH_SLICES', 12);
/** Trimmed at both ends of a slice: autocannon opening and closing its connections. */
const EDGE_US = 50_000;
const args = process.argv.slice(2);
if (args.includes('--bare') && args.includes('--stack'))
  throw new Error('sliced-profile: --bare or --stack, not both');
/** --bare or --stack: a reference proxy profiled instead of the gateway. */
const reference = args.includes('--bare')
  ? 'bare-proxy'
  : args.includes('--stack')
    ? 'stack-proxy'
    : undefined;
const versus = args.includes('--versus');
const governedOnly = args.includes('--governed');
const alone = args.includes('--alone');
const build = resolve(args.find((a) => !a.startsWith('--')) ?? ROOT);
const slow = args.includes('--slow');
const CONNECTIONS = slow ? envNumber('BENCH_SLOW_CONNECTIONS', 1000) : 32;
const LATENCY_MS = slow ? envNumber('BENCH_SLOW_LATENCY_MS', 150) : 0;
const SLICE_SECONDS = slow ? 2 : 1;

const spec = (load: Load, url: string, headers: Record<string, string>, seconds: number): LoadSpec =>
  load === 'GET'
    ? {
        url,
        pathFor: () => `/api/subscriptions/plan/${randomUUID()}`,
        method: 'GET',
        headers,
        durationSeconds: seconds,
        connections: CONNECTIONS,
        expectStatus: 404,
      }
    : {
        url: `${url}/api/validation/document`,
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: DOCUMENT_BODY,
        durationSeconds: seconds,
        connections: CONNECTIONS,
      };

/** The monotonic clock V8 stamps profile samples with, in µs. */
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

/** The profile with only the samples of one load's slices, summarized per request of that load. */
function summarizeSlices(file: string, slices: readonly Slice[], load: Load): ProfileSummary {
  const mine = slices.filter((s) => s.load === load);
  const requests = mine.reduce((sum, s) => sum + s.responses, 0);
  return summarizeCpuProfile(profileWithin(readCpuProfile(file), mine), 20, requests);
}

interface ProfiledTarget {
  readonly name: string;
  readonly dir: string;
  readonly served: Served;
  readonly headers: Record<string, string>;
  stop(): Promise<void>;
}

async function startTarget(
  tmp: string,
  upstream: string,
  name: string,
  governed: boolean,
): Promise<ProfiledTarget> {
  const dir = join(tmp, `profile-${name}`);
  const profiling = ['--cpu-prof', `--cpu-prof-dir=${dir}`];
  if (reference) {
    const apiKey = 'stack-proxy-key';
    const served =
      reference === 'bare-proxy'
        ? await startBareProxy(reference, upstream, 'bench.token.x', 1024, {}, profiling)
        : await startStackProxy(reference, upstream, 'bench.token.x', 1024, {
            apiKey,
            logFile: join(tmp, `${reference}.log`),
            extraEnv: {},
            nodeArgs: profiling,
          });
    return { name, dir, served, headers: { 'x-api-key': apiKey }, stop: async () => {} };
  }
  const { apiKey, clientsFile } = writeLoadClient('bench');
  const redis = await startRedis(tmp);
  const credentials = { username: 'sandbox-merchant', password: 'sandbox-password' };
  const setup = governed ? writeGovernedSetup('bench', apiKey, upstream) : undefined;
  const env = featuredGatewayEnv(
    {
      upstream,
      ...credentials,
      redisUrl: redis.url,
      clientsFile: setup?.clientsFile ?? clientsFile,
      accountsFile: setup?.accountsFile,
      logFile: join(tmp, `${name}.log`),
    },
    { SHUTDOWN_TIMEOUT_MS: '2000' },
  );
  const served = await startGatewayProcess(name, env, profiling, build);
  return { name, dir, served, headers: { 'x-api-key': apiKey }, stop: () => redis.proc.stop() };
}

const perRequest = (s: ProfileSummary, name: string) => {
  const entry = s.features.find((e) => e.name === name);
  return entry && s.requests ? (entry.selfMs * 1000) / s.requests : 0;
};
const cell = (n: number) => n.toFixed(1).padStart(7);

function report(title: string, get: ProfileSummary, post: ProfileSummary): string {
  const names = [...new Set([...get.features, ...post.features].map((e) => e.name))];
  const busy = (s: ProfileSummary) => names.reduce((sum, name) => sum + perRequest(s, name), 0);
  const lines = names
    .map((name) => ({ name, g: perRequest(get, name), p: perRequest(post, name) }))
    .sort((a, b) => Math.abs(b.g - b.p) - Math.abs(a.g - a.p))
    .map(({ name, g, p }) => `${cell(g)} ${cell(p)} ${cell(g - p)}  ${name}`);
  return [
    `${title}: busy µs per request by feature, ${SLICES} slices of ${SLICE_SECONDS} s each, ${CONNECTIONS} connections`,
    `    GET    POST  GET-POST`,
    ...lines,
    `${cell(busy(get))} ${cell(busy(post))} ${cell(busy(get) - busy(post))}  busy`,
    `(${(get.requests ?? 0).toFixed(0)} GETs, ${(post.requests ?? 0).toFixed(0)} POSTs profiled)`,
  ].join('\n');
}

/** Governed minus plain, per feature and load: what governing the accounts costs each request. */
function versusReport(plain: Record<Load, ProfileSummary>, governed: Record<Load, ProfileSummary>): string {
  const all = [plain.GET, plain.POST, governed.GET, governed.POST];
  const names = [...new Set(all.flatMap((s) => s.features.map((e) => e.name)))];
  const delta = (load: Load, name: string) =>
    perRequest(governed[load], name) - perRequest(plain[load], name);
  const busy = (s: ProfileSummary) => names.reduce((sum, name) => sum + perRequest(s, name), 0);
  const lines = names
    .map((name) => ({ name, g: delta('GET', name), p: delta('POST', name) }))
    .sort((a, b) => Math.abs(b.g) + Math.abs(b.p) - Math.abs(a.g) - Math.abs(a.p))
    .map(({ name, g, p }) => `${cell(g)} ${cell(p)}  ${name}`);
  return [
    'governed minus plain (same build, slices interleaved): busy µs per request by feature',
    '    GET    POST',
    ...lines,
    `${cell(busy(governed.GET) - busy(plain.GET))} ${cell(busy(governed.POST) - busy(plain.POST))}  busy`,
  ].join('\n');
}

async function main(): Promise<void> {
  const cpus = pinCpus(true);
  if (alone && !cpus) throw new Error('sliced-profile: --alone needs taskset and at least 2 CPUs');
  const tmp = mkdtempSync(join(tmpdir(), 'bff-sliced-'));
  if (!process.env.BENCH_KEEP) process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
  else process.stderr.write(`sliced-profile: profiles kept in ${tmp}\n`);
  const upstream = await startFastUpstream('fast-upstream', { latencyMs: LATENCY_MS, cpus: cpus?.upstream });
  // --alone: this process (the load) and every child from now on (Redis) on the upstream's CPU, the targets apart.
  if (alone && cpus) pinProcess(process.pid, cpus.upstream);
  const targets = versus
    ? [
        await startTarget(tmp, upstream.url, 'plain', false),
        await startTarget(tmp, upstream.url, 'governed', true),
      ]
    : [await startTarget(tmp, upstream.url, reference ?? 'gateway', governedOnly)];
  if (alone && cpus) for (const t of targets) pinProcess(t.served.proc.pid, cpus.rest);
  for (const t of targets)
    for (const load of ['GET', 'POST'] as const) await runLoad(spec(load, t.served.url, t.headers, 2));
  const slices = new Map<ProfiledTarget, Slice[]>(targets.map((t) => [t, []]));
  for (let i = 0; i < SLICES; i++)
    for (const t of i % 2 === 0 ? targets : [...targets].reverse())
      for (const load of i % 2 === 0 ? (['GET', 'POST'] as const) : (['POST', 'GET'] as const)) {
        const from = nowUs();
        const result = await runLoad(spec(load, t.served.url, t.headers, SLICE_SECONDS));
        const to = nowUs();
        const kept = (to - from - 2 * EDGE_US) / (to - from);
        slices
          .get(t)
          ?.push({ load, fromUs: from + EDGE_US, toUs: to - EDGE_US, responses: result.responses * kept });
      }
  const summaries: Record<Load, ProfileSummary>[] = [];
  for (const t of targets) {
    await t.served.proc.stop(15_000); // SIGTERM: a clean exit writes the .cpuprofile
    await t.stop();
    const file = readdirSync(t.dir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`no .cpuprofile was written for ${t.name}`);
    const path = join(t.dir, file);
    const mine = slices.get(t) ?? [];
    const summary = { GET: summarizeSlices(path, mine, 'GET'), POST: summarizeSlices(path, mine, 'POST') };
    summaries.push(summary);
    const title = reference ?? `${t.name === 'gateway' ? '' : `${t.name} `}gateway (${build})`;
    process.stdout.write(`${report(title, summary.GET, summary.POST)}\n\n`);
  }
  await upstream.proc.stop();
  const [plain, governed] = summaries;
  if (versus && plain && governed) process.stdout.write(`${versusReport(plain, governed)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`sliced-profile: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
