// Child processes of the benchmark: spawned on loopback, tracked, and always killed (also on error and Ctrl-C).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_SERVER_LISTEN_BACKLOG } from '../../src/config/env-schema';
import { freePort } from '../../test/support/ports';
import { redisPing, redisServerArgs } from '../../test/support/redis-server';
import { NODE, ROOT } from './fixtures';
import { gatewayNodeFlags } from './gateway-node-flags';
import { benchSimulatorEnv } from './governed-setup';

export { freePort };

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** The last 16 KiB of stdout and stderr, for diagnosing a process that failed. */
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
}

const running = new Set<ChildProcess>();
let hooked = false;

function killEverything(): void {
  for (const child of running) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  running.clear();
}

/** Kills every child on exit, and on SIGINT/SIGTERM (then exits 130/143). */
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', killEverything);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}, stopping every process it started\n`);
      killEverything();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  }
}

export function start(
  name: string,
  command: string,
  args: readonly string[],
  options: { env?: Record<string, string>; cwd?: string; cpus?: string } = {},
): Proc {
  hookExit();
  // taskset execs the command: the pid stays the command's own.
  const [file, argv] = options.cpus ? ['taskset', ['-c', options.cpus, command, ...args]] : [command, args];
  const child = spawn(file, argv, {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`bench: could not start ${name} (${command})`);
  running.add(child);
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-16_384);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      running.delete(child);
      resolve();
    }),
  );
  const pid = child.pid;
  return {
    name,
    child,
    pid,
    output: () => output,
    async stop(graceMs = 5_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

export function alive(proc: Proc): boolean {
  return proc.child.exitCode === null && proc.child.signalCode === null;
}

export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  proc?: Proc,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc && !alive(proc)) throw new Error(`bench: ${proc.name} exited early:\n${proc.output()}`);
    try {
      if (await check()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      throw new Error(`bench: timed out waiting for ${what}${proc ? `\n${proc.output()}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function httpOk(url: string): Promise<boolean> {
  const response = await fetch(url);
  await response.arrayBuffer();
  return response.ok;
}

/** A redis-server for the benchmark, tracked like every other child (kept in memory only). */
export async function startRedis(dir: string): Promise<{ proc: Proc; url: string }> {
  const port = await freePort();
  const args = redisServerArgs(port, dir);
  const proc = start('redis-server', 'redis-server', args);
  await waitFor('redis-server', () => redisPing(port), proc);
  return { proc, url: `redis://127.0.0.1:${port}` };
}

/** A process that serves HTTP on 127.0.0.1. */
export interface Served {
  readonly proc: Proc;
  readonly url: string;
}

/**
 * The bundled simulator as its own process on a free port (its credentials and TTLs come from `env`); it also knows
 * the governed set-up's second merchant (benchSimulatorEnv), so a governed gateway can log in both its accounts.
 */
export async function startSimulatorProcess(
  name: string,
  env: Record<string, string>,
  cpus?: string,
): Promise<Served> {
  const port = await freePort();
  const proc = start(name, NODE, [join(ROOT, 'dist/src/simulator/main.js')], {
    cwd: ROOT,
    env: benchSimulatorEnv({ SIMULATOR_HOST: '127.0.0.1', SIMULATOR_PORT: String(port), ...env }),
    cpus,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(name, () => httpOk(`${url}/__simulator/stats`), proc);
  return { proc, url };
}

/**
 * A gateway (`node <its build's production flags> dist/src/main.js`) on a free port, resolved once /readyz answers
 * 200; `build` is the checkout whose `dist/` it runs (this one unless comparing builds), `nodeArgs` come first
 * (profiling).
 */
export async function startGatewayProcess(
  name: string,
  env: Record<string, string>,
  nodeArgs: string[] = [],
  build: string = ROOT,
): Promise<Served> {
  const port = await freePort();
  const args = [...nodeArgs, ...gatewayNodeFlags(build), join(build, 'dist/src/main.js')];
  const proc = start(name, NODE, args, {
    cwd: ROOT,
    env: { HOST: '127.0.0.1', PORT: String(port), ...env },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(name, () => httpOk(`${url}/readyz`), proc);
  return { proc, url };
}

/** The minimal upstream (bench/lib/fast-upstream.ts), over https when given a certificate. */
export async function startFastUpstream(
  name: string,
  options: { latencyMs?: number; tls?: { certFile: string; keyFile: string; caFile: string }; cpus?: string },
): Promise<Served> {
  const port = await freePort();
  const proc = start(name, NODE, [join(ROOT, 'dist/bench/lib/fast-upstream.js')], {
    cwd: ROOT,
    env: {
      FAST_PORT: String(port),
      FAST_LATENCY_MS: String(options.latencyMs ?? 0),
      FAST_LISTEN_BACKLOG: String(DEFAULT_SERVER_LISTEN_BACKLOG),
      ...(options.tls ? { FAST_CERT_FILE: options.tls.certFile, FAST_KEY_FILE: options.tls.keyFile } : {}),
    },
    cpus: options.cpus,
  });
  const url = `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  // The bench process trusts the throwaway CA only for this probe (its own fetch is not given NODE_EXTRA_CA_CERTS).
  const probe = options.tls
    ? () => httpsOk(url, readFileSync(options.tls?.caFile ?? ''))
    : () => httpOk(`${url}/__simulator/stats`);
  await waitFor(name, probe, proc);
  return { proc, url };
}

function httpsOk(url: string, ca: Buffer): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${url}/__simulator/stats`, { ca, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.once('error', reject);
    req.end();
  });
}

/**
 * Where the processes run: with taskset and at least 2 CPUs, the upstream gets the last CPU to itself and this
 * process (the load generator) and every other child (they inherit it) the others. Undefined: nothing pinned.
 */
export function pinCpus(enabled: boolean): { upstream: string; rest: string } | undefined {
  const cpus = availableParallelism();
  if (!enabled || cpus < 2 || !onPath('taskset')) return undefined;
  const rest = cpus === 2 ? '0' : `0-${cpus - 2}`;
  // -a: every thread of this process (libuv pool, V8 helpers), not only the main one.
  pinProcess(process.pid, rest);
  return { upstream: String(cpus - 1), rest };
}

/** Moves a running process, every thread of it, to `cpus` (a taskset list). */
export function pinProcess(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-pc', cpus, String(pid)], { stdio: 'ignore' });
}

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => dir && existsSync(join(dir, command)));
}

/** Resident set size of a process in MiB (VmRSS); null off Linux or once it has exited. */
export function rssMiB(pid: number): number | null {
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : null;
  } catch {
    return null;
  }
}

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ: 100 on every Linux architecture Node supports

/** User + system CPU time of a process (and, with `withChildren`, of its direct children), in ms; null off Linux. */
export function cpuTimeMs(pid: number, withChildren = false): number | null {
  try {
    let total = ticksOf(pid);
    if (withChildren) for (const child of childrenOf(pid)) total += ticksOf(child);
    return (total * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

function ticksOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces: fields after it are split from the closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the full line, i.e. 11 and 12 after the state field (field 3).
  return Number(fields[11]) + Number(fields[12]);
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}
