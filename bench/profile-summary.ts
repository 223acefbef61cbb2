// Summarizes a V8 .cpuprofile (node --cpu-prof): the functions and the packages with the most self time, the
// gateway's busy time by feature, and by part of the specification (auth, limits, governance, forwarding, logging,
// metrics, express/http, other), the view `npm run bench` prints for a newcomer.
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
/** The parts of a V8 .cpuprofile this summary reads (`startTime`: µs of the monotonic clock). */
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime?: number;
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
  /** Busy time by part (every part of PARTS, in that order, zeros included); percent of busy time. */
  readonly parts: ProfileEntry[];
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

// --- parts: the specification's vocabulary, for a newcomer ---------------------------------------------------

/** The parts of the gateway a newcomer knows from the specification, plus what belongs to none of them. */
export const PARTS = [
  'auth',
  'limits',
  'governance',
  'forwarding',
  'logging',
  'metrics',
  'express/http',
  'other',
] as const;
export type Part = (typeof PARTS)[number];

/** Helpers shared by several parts: a sample in them counts for the part that called them. */
const CALLERS_PART = 'caller';

/**
 * Every folder under `src/` and the part its code counts for (a unit test checks this against the real layout, so a
 * new folder must be placed here). `caller`: shared helpers, counted for the part that calls them.
 */
export const SRC_DIR_PARTS: Readonly<Record<string, Part | typeof CALLERS_PART>> = {
  accounts: 'governance',
  assembly: CALLERS_PART, // the composition root: its closures run for the part that calls them
  budget: 'governance',
  callers: 'auth', // except the limit files (SRC_FILE_PARTS)
  catalogue: 'forwarding', // the operations' validation and answer filtering
  config: 'other',
  'dev-identity-provider': 'auth',
  'dev-web-app': 'other',
  forwarding: 'forwarding',
  http: 'express/http',
  idempotency: 'forwarding',
  keys: CALLERS_PART,
  observability: 'logging', // except the metrics files
  operations: 'other',
  routes: 'forwarding',
  sessions: 'auth',
  simulator: 'other',
  store: CALLERS_PART,
  tls: 'forwarding',
  tokens: 'forwarding',
  types: 'other',
  usage: 'governance',
};

/** Files (paths under `src/`, no extension) whose part is not their folder's; the top-level files of `src/`. */
export const SRC_FILE_PARTS: ReadonlyArray<readonly [RegExp, Part]> = [
  [/^callers\/(rate-limit|quota-lease-store|shared-counter-store|auth-failure-limit)$/, 'limits'],
  [/(^|\/)[^/]*metrics$/, 'metrics'], // observability/metrics, budget-metrics, account-metrics, usage-metrics
  [/^(app|server)$/, 'express/http'],
  [/^(main|gateway|local-mode)$/, 'other'],
];

/** Packages by part; a package not listed counts for the part that called it. */
const PACKAGE_PARTS: ReadonlyArray<readonly [Part, string]> = [
  ['auth', 'jose|openid-client|oidc-provider'],
  ['limits', 'express-rate-limit'],
  [
    'forwarding',
    'http-proxy-middleware|httpxy|undici|cockatiel|ajv|ajv-formats|fast-uri|fast-deep-equal|json-schema-traverse|i18n-iso-countries',
  ],
  [
    'logging',
    'pino|pino-std-serializers|sonic-boom|quick-format-unescaped|@pinojs/[^/]+|safe-stable-stringify|@opentelemetry/[^/]+',
  ],
  ['metrics', 'prom-client|tdigest|bintrees'],
  [
    'express/http',
    'express|router|body-parser|raw-body|iconv-lite|finalhandler|path-to-regexp|proxy-addr|forwarded|type-is|parseurl|helmet|on-finished|content-type|media-typer|mime-types|accepts|negotiator|vary|send|statuses|http-errors',
  ],
  ['other', 'ioredis|redis-parser|@ioredis/[^/]+|denque|cluster-key-slot|standard-as-callback|zod|yaml'],
];
const PACKAGE_PATTERNS = PACKAGE_PARTS.map(
  ([part, names]) => [part, new RegExp(`/node_modules/(?:${names})/(?!.*node_modules/)`)] as const,
);

/** What each part covers, one line each: printed beside the parts' figures. */
export const PART_LEGEND: Readonly<Record<Part, string>> = {
  auth: 'src/callers (API keys, OIDC, CORS, allow-list), src/sessions; jose, openid-client',
  limits:
    'src/callers/{rate-limit,quota-lease-store,shared-counter-store,auth-failure-limit}; express-rate-limit',
  governance: 'provider accounts, budget, quotas, usage ledger: src/accounts, src/budget, src/usage',
  forwarding:
    'src/forwarding, tokens, tls, idempotency, catalogue + routes (validation, answer filtering); http-proxy-middleware, undici, cockatiel, ajv; Node http client',
  logging: 'src/observability (request log, pino, tracing); pino, @opentelemetry',
  metrics: 'src/**/*metrics; prom-client',
  'express/http':
    'src/http, src/app, src/server; express, router, body-parser, helmet; Node http server, sockets',
  other:
    'GC, V8, Redis client (ioredis), src/config, operations, code of no part; src/keys, store, assembly count for their caller',
};

/**
 * The part a frame's code belongs to: a Part, `caller` (a shared helper: look further out), or undefined (Node.js
 * itself or a package not listed: look further out too).
 */
export function partOfUrl(url: string): Part | typeof CALLERS_PART | undefined {
  if (!url || url.startsWith('node:')) return undefined;
  if (url.includes('/node_modules/')) return PACKAGE_PATTERNS.find(([, pattern]) => pattern.test(url))?.[0];
  const at = url.lastIndexOf('/src/');
  if (at < 0) return undefined;
  const path = url.slice(at + '/src/'.length).replace(/\.(js|ts|mjs|cjs)$/, '');
  const file = SRC_FILE_PARTS.find(([pattern]) => pattern.test(path));
  if (file) return file[1];
  const dir = path.split('/')[0] ?? '';
  return path.includes('/') ? (SRC_DIR_PARTS[dir] ?? 'other') : 'other';
}

/** Node's HTTP client (the upstream leg) and its HTTP server and sockets (the callers' leg). */
const NODE_HTTP_CLIENT = /^node:(_http_client|_http_agent)$/;
const NODE_HTTP_SERVER = /^node:(_http_|https$|net$|_tls_|internal\/(stream_base_commons|streams\/|http))/;

/**
 * The innermost part on the sample's stack. With none (Node's own work called from the event loop): the upstream
 * leg when Node's HTTP client is on the stack, the callers' leg (express/http) when its HTTP server or a socket is,
 * else `other`.
 */
function partOfSample(id: number, byId: Map<number, ProfileNode>, parentOf: Map<number, number>): Part {
  let client = false;
  let server = false;
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const url = byId.get(at)?.callFrame.url ?? '';
    const part = partOfUrl(url);
    if (part !== undefined && part !== CALLERS_PART) return part;
    client ||= NODE_HTTP_CLIENT.test(url);
    server ||= NODE_HTTP_SERVER.test(url);
  }
  return client ? 'forwarding' : server ? 'express/http' : 'other';
}

/** A window of the monotonic clock V8 stamps samples with, µs. */
export interface ProfileWindow {
  readonly fromUs: number;
  readonly toUs: number;
}

/** The profile with only the samples taken inside one of `windows` (each sample's time: startTime + its deltas). */
export function profileWithin(profile: CpuProfile, windows: readonly ProfileWindow[]): CpuProfile {
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  let at = profile.startTime ?? 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (windows.some((w) => at >= w.fromUs && at < w.toUs)) {
      samples.push(id);
      timeDeltas.push(delta);
    }
  });
  return { ...profile, samples, timeDeltas };
}

/**
 * µs per request by part, one column per load (each summary must know its requests), with the legend of each part
 * beside it and the busy total under them.
 */
export function formatParts(columns: ReadonlyArray<{ label: string; summary: ProfileSummary }>): string {
  const perRequest = (summary: ProfileSummary, part: string) => {
    const entry = summary.parts.find((e) => e.name === part);
    return entry && summary.requests ? (entry.selfMs * 1000) / summary.requests : Number.NaN;
  };
  const width = Math.max(7, ...columns.map((c) => c.label.length + 1));
  const cell = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : '-').padStart(width);
  const nameWidth = Math.max(...PARTS.map((p) => p.length));
  const busy = (summary: ProfileSummary) => PARTS.reduce((sum, part) => sum + perRequest(summary, part), 0);
  return [
    `${columns.map((c) => c.label.padStart(width)).join('')}  ${'part'.padEnd(nameWidth)}  what it covers`,
    ...PARTS.map(
      (part) =>
        `${columns.map((c) => cell(perRequest(c.summary, part))).join('')}  ${part.padEnd(nameWidth)}  ${PART_LEGEND[part]}`,
    ),
    `${columns.map((c) => cell(busy(c.summary))).join('')}  ${'busy'.padEnd(nameWidth)}  all of the above (idle left out)`,
  ].join('\n');
}

export function summarizeProfile(file: string, top = 15, requests?: number): ProfileSummary {
  return summarizeCpuProfile(readCpuProfile(file), top, requests);
}

export function readCpuProfile(file: string): CpuProfile {
  return JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
}

export function summarizeCpuProfile(profile: CpuProfile, top = 15, requests?: number): ProfileSummary {
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
  const parts = new Map<string, number>(PARTS.map((part) => [part, 0]));
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
    const part = PSEUDO_FRAMES.has(frame.functionName) ? 'other' : partOfSample(id, byId, parentOf);
    parts.set(part, (parts.get(part) ?? 0) + us);
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
    parts: [...parts].map(([name, us]) => ({
      name,
      selfMs: us / 1000,
      percent: busy > 0 ? (100 * us) / busy : 0,
    })),
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
