// Summarizes a V8 .cpuprofile (node --cpu-prof): the functions and the packages with the most self time, and the
// gateway's busy time by feature.
//   node dist/bench/profile-summary.js <file.cpuprofile> [topN] [requests]
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileEntry {
  readonly name: string;
  readonly selfMs: number;
  readonly percent: number;
}

export interface ProfileSummary {
  readonly totalMs: number;
  readonly functions: ProfileEntry[];
  readonly packages: ProfileEntry[];
  /** Busy time (idle excluded) by gateway feature; percent of busy time. */
  readonly features: ProfileEntry[];
  /** Requests served while profiling, when known: the features are then also shown per request. */
  readonly requests?: number;
}

/**
 * The gateway's features by the code that implements them. A sample counts for the innermost feature on its stack,
 * so a feature's time includes the Node.js work it calls (the forwarder's includes writing to the sockets) but not
 * the features it calls in turn (Express's `next()` into the next middleware counts for Express).
 */
const FEATURES: ReadonlyArray<readonly [string, ReadonlyArray<RegExp>]> = [
  [
    'request log',
    [packages('pino|sonic-boom|quick-format-unescaped'), ownCode('observability/(logger|request-log)\\.')],
  ],
  ['metrics', [packages('prom-client')]],
  ['security headers (helmet)', [packages('helmet')]],
  ['CORS', [ownCode('callers/cors\\.')]],
  ['authentication', [ownCode('callers/(authenticate|client-registry|oidc-verifier)\\.'), packages('jose')]],
  ['rate limit', [packages('express-rate-limit'), ownCode('callers/(rate-limit|quota-lease-store)\\.')]],
  ['JSON body', [ownCode('http/json-body\\.'), packages('body-parser|raw-body|iconv-lite')]],
  ['validation (zod) + route handlers', [packages('zod'), ownCode('routes/')]],
  ['provider accounts (choice, hold, quota guard)', [ownCode('accounts/')]],
  ['provider budget', [ownCode('budget/')]],
  ['quotas + usage ledger', [ownCode('usage/')]],
  ['circuit breaker (cockatiel)', [packages('cockatiel'), ownCode('forwarding/internal/circuit-breaker\\.')]],
  ['forwarder, tokens, plan reads', [ownCode('(forwarding|tokens|store|tls|keys)/')]],
  ['proxy (http-proxy-middleware, httpxy)', [packages('http-proxy-middleware|httpxy')]],
  ['request context (id, markers)', [ownCode('http/(request-context|request-id)\\.')]],
  ['Redis client (ioredis)', [packages('ioredis|redis-parser|@ioredis/[^/]+')]],
  [
    'Express + router',
    [packages('express|router|path-to-regexp|finalhandler|proxy-addr|forwarded|type-is|parseurl')],
  ],
];

/** Code of the named packages (a `|`-separated pattern). */
function packages(names: string): RegExp {
  return new RegExp(`/node_modules/(?:${names})/`);
}

/** The gateway's own code under `src/` (built or not), never a package's `src/` folder. */
function ownCode(path: string): RegExp {
  return new RegExp(`^(?!.*/node_modules/).*/src/(?:${path})`);
}

const OUTSIDE_FEATURES = 'Node.js HTTP, streams, timers (no feature on the stack)';
const PSEUDO_FRAMES = new Set(['(garbage collector)', '(program)']);

export function summarizeProfile(file: string, top = 15, requests?: number): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const functions = new Map<string, number>();
  const packages = new Map<string, number>();
  const features = new Map<string, number>();
  let total = 0;
  let busy = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)?.callFrame;
    if (!frame) continue;
    total += us;
    const where = shortUrl(frame.url);
    const name =
      `${frame.functionName || '(anonymous)'} ${where ? `${where}:${frame.lineNumber + 1}` : ''}`.trim();
    functions.set(name, (functions.get(name) ?? 0) + us);
    const pkg = packageOf(frame);
    packages.set(pkg, (packages.get(pkg) ?? 0) + us);
    if (frame.functionName === '(idle)') continue;
    const feature = PSEUDO_FRAMES.has(frame.functionName)
      ? frame.functionName
      : featureOf(id, byId, parentOf);
    features.set(feature, (features.get(feature) ?? 0) + us);
    busy += us;
  }
  const entries = (map: Map<string, number>, limit = top, of = total) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([name, us]) => ({ name, selfMs: us / 1000, percent: (100 * us) / of }));
  return {
    totalMs: total / 1000,
    functions: entries(functions),
    packages: entries(packages),
    features: entries(features, features.size, busy),
    requests,
  };
}

/** The innermost feature on the sample's stack. */
function featureOf(id: number, byId: Map<number, ProfileNode>, parentOf: Map<number, number>): string {
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const url = byId.get(at)?.callFrame.url;
    if (!url) continue;
    for (const [feature, code] of FEATURES) if (code.some((pattern) => pattern.test(url))) return feature;
  }
  return OUTSIDE_FEATURES;
}

function shortUrl(url: string): string {
  if (!url) return '';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) return url.slice(nm + 'node_modules/'.length);
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return url.slice(dist + '/dist/'.length);
  return url.replace(/^file:\/\//, '');
}

/** A package name, `node:<builtin>`, `gateway:src/...` or a V8 pseudo-frame ((garbage collector), (program), ...). */
function packageOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + 'node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? url);
  }
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/').slice(0, 2).join('/')}`;
  const dist = url.indexOf('/dist/');
  if (dist >= 0)
    return `gateway:${url
      .slice(dist + '/dist/'.length)
      .split('/')
      .slice(0, 2)
      .join('/')}`;
  return url;
}

export function formatProfile(summary: ProfileSummary): string {
  const lines = [`total sampled: ${summary.totalMs.toFixed(0)} ms`, '', 'top self time by function:'];
  for (const e of summary.functions)
    lines.push(`  ${e.percent.toFixed(1).padStart(5)}%  ${e.selfMs.toFixed(0).padStart(6)} ms  ${e.name}`);
  lines.push('', 'self time by package:');
  for (const e of summary.packages)
    lines.push(`  ${e.percent.toFixed(1).padStart(5)}%  ${e.selfMs.toFixed(0).padStart(6)} ms  ${e.name}`);
  const { requests } = summary;
  lines.push(
    '',
    `busy time by gateway feature (innermost feature on the stack; % of busy time${requests ? ', µs per request' : ''}):`,
  );
  for (const e of summary.features) {
    const perRequest = requests ? `  ${((e.selfMs * 1000) / requests).toFixed(1).padStart(6)} µs` : '';
    lines.push(
      `  ${e.percent.toFixed(1).padStart(5)}%  ${e.selfMs.toFixed(0).padStart(6)} ms${perRequest}  ${e.name}`,
    );
  }
  return lines.join('\n');
}

if (require.main === module) {
  const [file, top, requests] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node dist/bench/profile-summary.js <file.cpuprofile> [topN] [requests]\n');
    process.exit(2);
  }
  const summary = summarizeProfile(file, Number(top ?? 15), requests ? Number(requests) : undefined);
  process.stdout.write(`${formatProfile(summary)}\n`);
}
