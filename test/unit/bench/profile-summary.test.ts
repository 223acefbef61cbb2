// The profile summary's views by feature and by part: each sample counts for the innermost feature (part) on its stack.
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  formatParts,
  formatProfile,
  PART_LEGEND,
  PARTS,
  partOfUrl,
  profileWithin,
  SRC_DIR_PARTS,
  SRC_FILE_PARTS,
  summarizeProfile,
} from '../../../bench/profile-summary';
import { tempDir } from '../../support/temp-dir';

const APP = 'file:///srv/gateway/dist/src';
const MODULES = 'file:///srv/gateway/node_modules';

interface Node {
  id: number;
  callFrame: ReturnType<typeof frame>;
  children?: number[];
}

function frame(functionName: string, url = '') {
  return { functionName, url, lineNumber: 1, columnNumber: 1 };
}

/** A .cpuprofile of the given frames and, per frame, the µs sampled there. */
function writeProfileOf(nodes: Node[], samples: Record<number, number>): string {
  const ids = Object.keys(samples).map(Number);
  const file = join(tempDir('bff-profile-'), 'test.cpuprofile');
  writeFileSync(
    file,
    JSON.stringify({
      nodes,
      samples: ids,
      timeDeltas: ids.map((id) => samples[id]),
      startTime: 0,
      endTime: 10_000,
    }),
  );
  return file;
}

/** A tiny profile of a gateway: Express, helmet, the request log, GC, idle and Node's own HTTP work. */
function writeProfile(): string {
  const nodes: Node[] = [
    { id: 1, callFrame: frame('(root)'), children: [2, 3, 4, 5, 9] },
    { id: 2, callFrame: frame('(idle)') },
    { id: 3, callFrame: frame('(garbage collector)') },
    // Express runs helmet, which sets headers (Node's code, counted for helmet) and calls next() into Express.
    { id: 4, callFrame: frame('handle', `${MODULES}/express/lib/application.js`), children: [6] },
    { id: 6, callFrame: frame('helmetMiddleware', `${MODULES}/helmet/index.cjs`), children: [7, 8] },
    { id: 7, callFrame: frame('setHeader', 'node:_http_outgoing') },
    { id: 8, callFrame: frame('next', `${MODULES}/router/index.js`) },
    // The request log's close handler calls pino, which writes to the file (a native frame).
    { id: 5, callFrame: frame('onClose', `${APP}/observability/request-log.js`), children: [10] },
    { id: 10, callFrame: frame('write', `${MODULES}/pino/lib/proto.js`), children: [11] },
    { id: 11, callFrame: frame('writeSync') },
    // Node's HTTP parser with no feature on the stack.
    { id: 9, callFrame: frame('parserOnHeadersComplete', 'node:_http_common') },
  ];
  const samples: Record<number, number> = {
    2: 5_000,
    3: 1_000,
    4: 500,
    6: 200,
    7: 300,
    8: 400,
    5: 100,
    10: 700,
    11: 1_200,
    9: 600,
  };
  return writeProfileOf(nodes, samples);
}

describe('profile summary by feature', () => {
  test('counts each sample for the innermost feature on its stack, idle left out, GC apart', () => {
    const summary = summarizeProfile(writeProfile(), 15, 10);
    const features = Object.fromEntries(summary.features.map((e) => [e.name, e.selfMs]));
    expect(features).toEqual({
      'request log': 2.0, // its handler 0.1 + pino 0.7 + the native write under it 1.2
      'Express + router': 0.9, // application.js 0.5 + router next 0.4 (called by helmet, but router's own code)
      'security headers (helmet)': 0.5, // helmet 0.2 + Node's setHeader under it 0.3
      '(garbage collector)': 1.0,
      'Node.js HTTP, streams, timers (no feature on the stack)': 0.6,
    });
    const busyMs = 5.0;
    for (const entry of summary.features) expect(entry.percent).toBeCloseTo((100 * entry.selfMs) / busyMs, 6);
    expect(summary.features[0]?.name).toBe('request log');
  });

  test('prints µs per request when the number of requests is known', () => {
    const text = formatProfile(summarizeProfile(writeProfile(), 15, 10));
    expect(text).toMatch(/40\.0%\s+2 ms\s+200\.0 µs\s+request log/);
    expect(formatProfile(summarizeProfile(writeProfile(), 15))).not.toContain('µs');
  });

  test("a gateway module counts for its own feature, and a package's src/ folder is never taken for the gateway's", () => {
    const nodes: Node[] = [
      { id: 1, callFrame: frame('(root)'), children: [2, 4] },
      // The forwarder calls the circuit breaker: the breaker's wrapper is its own feature, not the forwarder's.
      { id: 2, callFrame: frame('forward', `${APP}/forwarding/internal/forwarder.js`), children: [3] },
      { id: 3, callFrame: frame('execute', `${APP}/forwarding/internal/circuit-breaker.js`) },
      // A dependency that happens to ship src/routes/ and src/upstream/ folders.
      { id: 4, callFrame: frame('route', `${MODULES}/some-lib/src/routes/index.js`), children: [5] },
      { id: 5, callFrame: frame('call', `${MODULES}/some-lib/src/upstream/client.js`) },
    ];
    const summary = summarizeProfile(writeProfileOf(nodes, { 2: 100, 3: 200, 4: 300, 5: 400 }));
    expect(Object.fromEntries(summary.features.map((e) => [e.name, e.selfMs]))).toEqual({
      'forwarder, tokens, plan reads': 0.1,
      'circuit breaker (cockatiel)': 0.2,
      'Node.js HTTP, streams, timers (no feature on the stack)': 0.7,
    });
  });

  test('governing an account counts apart: the account guard, the budget, the quotas and the ledger, each its own', () => {
    const nodes: Node[] = [
      { id: 1, callFrame: frame('(root)'), children: [2] },
      // The account's quota guard wraps the forwarder, which asks the budget; the ledger counts at the end.
      { id: 2, callFrame: frame('forward', `${APP}/accounts/account.js`), children: [3, 4, 6] },
      { id: 3, callFrame: frame('reserve', `${APP}/usage/internal/quota-gate.js`) },
      { id: 4, callFrame: frame('forward', `${APP}/forwarding/internal/forwarder.js`), children: [5] },
      { id: 5, callFrame: frame('admit', `${APP}/budget/internal/provider-budget.js`) },
      { id: 6, callFrame: frame('record', `${APP}/usage/internal/usage-ledger.js`) },
    ];
    const summary = summarizeProfile(writeProfileOf(nodes, { 2: 100, 3: 200, 4: 300, 5: 400, 6: 500 }));
    expect(Object.fromEntries(summary.features.map((e) => [e.name, e.selfMs]))).toEqual({
      'provider accounts (choice, hold, quota guard)': 0.1,
      'quotas + usage ledger': 0.7,
      'forwarder, tokens, plan reads': 0.3,
      'provider budget': 0.4,
    });
  });
});

describe("profile summary by part (the specification's vocabulary)", () => {
  test('counts each sample for the innermost part on its stack; shared helpers for their caller; Node alone by its leg', () => {
    const nodes: Node[] = [
      { id: 1, callFrame: frame('(root)'), children: [2, 20, 30, 40] },
      // Express runs the guards: authentication hashes the key through src/keys (a helper: counted for auth).
      { id: 2, callFrame: frame('handle', `${MODULES}/express/lib/application.js`), children: [3, 5, 7] },
      { id: 3, callFrame: frame('authenticate', `${APP}/callers/authenticate.js`), children: [4] },
      { id: 4, callFrame: frame('keyHash', `${APP}/keys/hash.js`) },
      // The rate limit is a limit, though it lives in src/callers.
      { id: 5, callFrame: frame('limit', `${APP}/callers/rate-limit.js`), children: [6] },
      { id: 6, callFrame: frame('increment', `${MODULES}/express-rate-limit/dist/index.cjs`) },
      // The route forwards; the forwarder asks the account, whose metrics count as metrics.
      { id: 7, callFrame: frame('forward', `${APP}/forwarding/internal/forwarder.js`), children: [8] },
      { id: 8, callFrame: frame('hold', `${APP}/accounts/account.js`), children: [9] },
      { id: 9, callFrame: frame('count', `${APP}/accounts/account-metrics.js`), children: [10] },
      { id: 10, callFrame: frame('inc', `${MODULES}/prom-client/lib/counter.js`) },
      // The upstream's answer parsed by Node's HTTP client, no part on the stack: the upstream leg.
      { id: 20, callFrame: frame('socketOnData', 'node:_http_client'), children: [21] },
      { id: 21, callFrame: frame('parserOnHeadersComplete', 'node:_http_common') },
      // A caller's request parsed by Node's HTTP server: the callers' leg.
      { id: 30, callFrame: frame('socketOnData', 'node:_http_server'), children: [31] },
      { id: 31, callFrame: frame('parserOnHeadersComplete', 'node:_http_common') },
      // A Redis reply parsed, and a timer of nobody's: other.
      { id: 40, callFrame: frame('processTimers', 'node:internal/timers'), children: [41] },
      { id: 41, callFrame: frame('parse', `${MODULES}/redis-parser/lib/parser.js`) },
    ];
    const samples = {
      2: 100,
      3: 200,
      4: 300,
      5: 400,
      6: 500,
      7: 600,
      8: 700,
      9: 800,
      10: 900,
      21: 1_000,
      31: 1_100,
      40: 50,
      41: 1_200,
    };
    const summary = summarizeProfile(writeProfileOf(nodes, samples), 15, 10);
    expect(Object.fromEntries(summary.parts.map((e) => [e.name, e.selfMs]))).toEqual({
      auth: 0.5,
      limits: 0.9,
      governance: 0.7,
      forwarding: 1.6, // the forwarder 0.6 + Node's HTTP client 1.0
      logging: 0,
      metrics: 1.7,
      'express/http': 1.2, // Express 0.1 + Node's HTTP server 1.1
      other: 1.25,
    });
    expect(summary.parts.map((e) => e.name)).toEqual([...PARTS]);
  });

  test('every folder and top-level file under src/ has its part, and no part is given to a folder that is gone', () => {
    const src = join(__dirname, '..', '..', '..', 'src');
    const entries = readdirSync(src, { withFileTypes: true });
    const dirs = entries.filter((e) => e.isDirectory()).map((e) => e.name);
    expect(Object.keys(SRC_DIR_PARTS).sort()).toEqual(dirs.sort());
    const files = entries
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => e.name.replace(/\.ts$/, ''));
    for (const file of files) expect(SRC_FILE_PARTS.some(([pattern]) => pattern.test(file))).toBe(true);
    // Built or not, the same file has the same part; a package's own src/ folder is not the gateway's.
    expect(partOfUrl(`${APP}/usage/internal/usage-ledger.js`)).toBe('governance');
    expect(partOfUrl('file:///srv/gateway/src/usage/internal/usage-ledger.ts')).toBe('governance');
    expect(partOfUrl(`${MODULES}/some-lib/src/usage/index.js`)).toBeUndefined();
    expect(partOfUrl(`${MODULES}/express-rate-limit/node_modules/debug/src/index.js`)).toBeUndefined();
  });

  test('prints µs per request of each part for each load, the busy total and what each part covers', () => {
    const file = writeProfile();
    const text = formatParts([
      { label: 'GET', summary: summarizeProfile(file, 15, 10) },
      { label: 'POST', summary: summarizeProfile(file, 15, 20) },
    ]);
    const lines = text.split('\n');
    expect(lines).toHaveLength(PARTS.length + 2);
    // The request log 2.0 ms over 10 requests, then over 20.
    expect(text).toMatch(/^\s+200\.0\s+100\.0\s+logging\s+src\/observability/m);
    // helmet and Express, and Node's HTTP parser alone: express/http (0.5 + 0.9 + 0.6 ms).
    expect(text).toMatch(/^\s+200\.0\s+100\.0\s+express\/http\s+src\/http/m);
    expect(text).toMatch(/^\s+500\.0\s+250\.0\s+busy\s/m);
    for (const part of PARTS) expect(text).toContain(PART_LEGEND[part]);
  });

  test('keeps only the samples taken inside the windows', () => {
    const profile = {
      nodes: [{ id: 1, callFrame: frame('(root)') }],
      startTime: 1_000,
      samples: [1, 1, 1, 1],
      timeDeltas: [100, 100, 100, 100], // at 1,100 1,200 1,300 1,400
    };
    const kept = profileWithin(profile, [
      { fromUs: 1_150, toUs: 1_300 },
      { fromUs: 1_400, toUs: 2_000 },
    ]);
    expect(kept.samples).toHaveLength(2);
    expect(kept.timeDeltas).toEqual([100, 100]);
  });
});
