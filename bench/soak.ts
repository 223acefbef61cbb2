// `npm run soak`: one gateway process (with Redis and the simulator) under steady load for minutes; memory and
// event-loop lag must stay flat. Not part of CI.
//
//   npm run soak [-- --keep]
//   SOAK_MINUTES (5)  SOAK_RATE (200 req/s, open loop)  SOAK_SAMPLE_SECONDS (10)  SOAK_WARMUP_SECONDS (60)
//
// Every SOAK_SAMPLE_SECONDS it samples the gateway's RSS (/proc/<pid>/status), its heap and event-loop lag p99
// (prom-client default metrics on /metrics) and the p99 latency seen from outside over the interval, and prints a
// row. Verdict: flat when, after the warm-up, the median of the last third of the samples is within 20% of the
// median of the first third (lag and latency: or within 5 ms). Exit 0 when flat, 1 otherwise. Every process it
// starts is killed at the end, on error and on Ctrl-C; its temp directory (the gateway log) is removed unless --keep.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DOCUMENT_BODY, envNumber, featuredGatewayEnv, PLAN_ID, writeLoadClient } from './lib/fixtures';
import { type Proc, startGatewayProcess, startRedis, startSimulatorProcess } from './lib/processes';

const USERNAME = 'soak-merchant';
const PASSWORD = randomBytes(12).toString('hex');

const settings = {
  minutes: envNumber('SOAK_MINUTES', 5),
  rate: envNumber('SOAK_RATE', 200),
  sampleSeconds: envNumber('SOAK_SAMPLE_SECONDS', 10),
  warmupSeconds: envNumber('SOAK_WARMUP_SECONDS', 60),
};
/** Requests in flight beyond this are not sent (counted as shed): a stuck gateway must not exhaust the driver. */
const MAX_IN_FLIGHT = 1_000;

interface Sample {
  readonly atSeconds: number;
  readonly rssMb: number;
  readonly heapMb: number;
  readonly loopLagP99Ms: number;
  readonly p99Ms: number;
  readonly requests: number;
  readonly errors: number;
}

async function main(): Promise<void> {
  const log = (line: string) => process.stderr.write(`soak: ${line}\n`);
  const tmp = mkdtempSync(join(tmpdir(), 'bff-soak-'));
  // Removed on every exit (success, failure, Ctrl-C) unless --keep asks to look at the gateway log afterwards.
  if (!process.argv.includes('--keep'))
    process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
  log(
    `${settings.minutes} min at ${settings.rate} req/s, a sample every ${settings.sampleSeconds} s, ` +
      `warm-up ${settings.warmupSeconds} s, node ${process.version}, temp ${tmp}`,
  );

  const { proc: redis, url: redisUrl } = await startRedis(tmp);

  const simulator = await startSimulatorProcess('simulator', {
    SIMULATOR_USERNAME: USERNAME,
    SIMULATOR_PASSWORD: PASSWORD,
    // Short access tokens: the refresh path runs many times during the soak.
    SIMULATOR_ACCESS_TTL_SECONDS: '90',
  });

  const { apiKey, clientsFile } = writeLoadClient('soak');
  const gateway = await startGatewayProcess(
    'gateway',
    featuredGatewayEnv({
      upstream: simulator.url,
      username: USERNAME,
      password: PASSWORD,
      redisUrl,
      clientsFile,
      logFile: join(tmp, 'gateway.log'),
    }),
  );
  const stopAll = async () => {
    await Promise.all([gateway.proc, simulator.proc, redis].map((p) => p.stop(2_000)));
  };

  try {
    const samples = await soak(gateway.proc, gateway.url, apiKey, log);
    const verdict = judge(samples);
    process.stdout.write(`${table(samples)}\n\n${verdict.lines.join('\n')}\n`);
    process.stdout.write(`\nverdict: ${verdict.flat ? 'FLAT' : 'NOT FLAT'}\n`);
    await stopAll();
    process.exit(verdict.flat ? 0 : 1);
  } catch (error) {
    log(`failed: ${(error as Error).message}`);
    await stopAll();
    process.exit(2);
  }
}

async function soak(gateway: Proc, url: string, apiKey: string, log: (l: string) => void): Promise<Sample[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const { port } = new URL(url);
  const started = performance.now();
  const endAt = started + settings.minutes * 60_000;
  const samples: Sample[] = [];
  let latencies: number[] = [];
  let requests = 0;
  let errors = 0;
  let inFlight = 0;
  let shed = 0;
  let n = 0;

  const fire = () => {
    if (inFlight >= MAX_IN_FLIGHT) {
      shed += 1;
      return;
    }
    inFlight += 1;
    requests += 1;
    const post = n++ % 2 === 1;
    const sentAt = performance.now();
    const req = request(
      {
        host: '127.0.0.1',
        port,
        agent,
        method: post ? 'POST' : 'GET',
        path: post ? '/api/validation/document' : `/api/subscriptions/plan/${PLAN_ID}`,
        headers: post
          ? {
              'x-api-key': apiKey,
              'content-type': 'application/json',
              'content-length': DOCUMENT_BODY.length,
            }
          : { 'x-api-key': apiKey },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          inFlight -= 1;
          latencies.push(performance.now() - sentAt);
          if (res.statusCode !== 200) errors += 1;
        });
      },
    );
    req.on('error', () => {
      inFlight -= 1;
      errors += 1;
    });
    req.end(post ? DOCUMENT_BODY : undefined);
  };

  // Open loop: a fixed number of requests every 10 ms, whatever the answers do.
  let debt = 0;
  const perTick = settings.rate / 100;
  const ticker = setInterval(() => {
    debt += perTick;
    while (debt >= 1) {
      fire();
      debt -= 1;
    }
  }, 10);

  try {
    while (performance.now() < endAt) {
      await new Promise((r) => setTimeout(r, settings.sampleSeconds * 1_000));
      const interval = latencies.sort((a, b) => a - b);
      latencies = [];
      const metrics = await metricsOf(url);
      const sample: Sample = {
        atSeconds: Math.round((performance.now() - started) / 1000),
        rssMb: rssMb(gateway.pid),
        heapMb: (metrics.nodejs_heap_size_used_bytes ?? Number.NaN) / 2 ** 20,
        loopLagP99Ms: (metrics.nodejs_eventloop_lag_p99_seconds ?? Number.NaN) * 1000,
        p99Ms: interval[Math.max(0, Math.ceil(interval.length * 0.99) - 1)] ?? Number.NaN,
        requests,
        errors,
      };
      requests = 0;
      errors = 0;
      samples.push(sample);
      log(
        `t=${sample.atSeconds}s rss ${sample.rssMb.toFixed(1)} MB, heap ${sample.heapMb.toFixed(1)} MB, ` +
          `loop lag p99 ${sample.loopLagP99Ms.toFixed(1)} ms, p99 ${sample.p99Ms.toFixed(1)} ms, ` +
          `${sample.requests} requests, ${sample.errors} errors${shed ? `, ${shed} shed` : ''}`,
      );
    }
  } finally {
    clearInterval(ticker);
    agent.destroy();
  }
  return samples;
}

async function metricsOf(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const values: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^(nodejs_eventloop_lag_p99_seconds|nodejs_heap_size_used_bytes) ([\d.e+-]+)$/.exec(line);
    if (match) values[match[1] as string] = Number(match[2]);
  }
  return values;
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  return kb ? Number(kb) / 1024 : Number.NaN;
}

function median(values: number[]): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function judge(all: Sample[]): { flat: boolean; lines: string[] } {
  const samples = all.filter((s) => s.atSeconds > settings.warmupSeconds);
  if (samples.length < 3) return { flat: false, lines: ['too few samples after the warm-up to judge'] };
  const third = Math.max(1, Math.floor(samples.length / 3));
  const first = samples.slice(0, third);
  const last = samples.slice(-third);
  const checks: [string, keyof Sample, number][] = [
    ['RSS (MB)', 'rssMb', 0],
    ['heap used (MB)', 'heapMb', 0],
    ['event-loop lag p99 (ms)', 'loopLagP99Ms', 5],
    ['latency p99 (ms)', 'p99Ms', 5],
  ];
  let flat = true;
  const lines = checks.map(([name, key, slack]) => {
    const a = median(first.map((s) => s[key]));
    const b = median(last.map((s) => s[key]));
    const ok = b <= a * 1.2 || b - a <= slack;
    if (!ok) flat = false;
    return `${ok ? 'flat ' : 'GROWS'} ${name}: first-third median ${a.toFixed(1)}, last-third median ${b.toFixed(1)}`;
  });
  const errors = all.reduce((sum, s) => sum + s.errors, 0);
  if (errors > 0) flat = false;
  lines.push(`${errors === 0 ? 'ok   ' : 'FAIL '} non-200 answers or errors: ${errors}`);
  return { flat, lines };
}

function table(samples: Sample[]): string {
  const head = ['t (s)', 'RSS MB', 'heap MB', 'loop lag p99 ms', 'latency p99 ms', 'requests', 'errors'];
  const rows = samples.map((s) => [
    String(s.atSeconds),
    s.rssMb.toFixed(1),
    s.heapMb.toFixed(1),
    s.loopLagP99Ms.toFixed(1),
    s.p99Ms.toFixed(1),
    String(s.requests),
    String(s.errors),
  ]);
  return [head, head.map(() => '---'), ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

void main();
