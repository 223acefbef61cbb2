// Paired comparisons of two targets measured in the same rounds: each round runs the two back to back, so a slow
// moment of the shared machine weighs on both. Used for the gateway/bare ratios and for `--compare` (two builds).
import { median } from './load';

/** What one target gave in one round. */
export interface RoundSample {
  readonly rps: number;
  readonly cpuMsPerRequest: number | null;
}

export interface PairedRatio {
  /** Median over rounds of the round's throughput ratio. */
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** Median throughput of one target over the other's (the two medians may come from different rounds). */
  readonly ofMedians: number;
}

/** Throughput of `a` over `b`, round by round; null when no round has both. */
export function pairedRatio(a: readonly RoundSample[], b: readonly RoundSample[]): PairedRatio | null {
  const perRound = a.flatMap((sample, i) => {
    const other = b[i];
    return other && other.rps > 0 ? [sample.rps / other.rps] : [];
  });
  const medianB = median(b.map((s) => s.rps));
  if (perRound.length === 0 || !(medianB > 0)) return null;
  return {
    median: round(median(perRound), 3),
    min: round(Math.min(...perRound), 3),
    max: round(Math.max(...perRound), 3),
    ofMedians: round(median(a.map((s) => s.rps)) / medianB, 3),
  };
}

/** Build `compare` against build `gateway` in one scenario. */
export interface PairedComparison {
  /** Throughput of `compare` over `gateway`. */
  readonly throughput: PairedRatio | null;
  /** CPU µs per request of `compare` minus `gateway`. */
  readonly cpuUsPerRequestDelta: CpuDelta | null;
}

/** CPU µs per request of `a` minus `b`, round by round: median, lowest and highest round. */
export interface CpuDelta {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** Rounds in which `a` used less CPU per request, of the `rounds` with both measured. */
  readonly roundsCheaper: number;
  readonly rounds: number;
}

export function pairedCpuDelta(a: readonly RoundSample[], b: readonly RoundSample[]): CpuDelta | null {
  const deltas = a.flatMap((sample, i) => {
    const other = b[i];
    return other && sample.cpuMsPerRequest !== null && other.cpuMsPerRequest !== null
      ? [1000 * (sample.cpuMsPerRequest - other.cpuMsPerRequest)]
      : [];
  });
  if (deltas.length === 0) return null;
  return {
    median: round(median(deltas), 1),
    min: round(Math.min(...deltas), 1),
    max: round(Math.max(...deltas), 1),
    roundsCheaper: deltas.filter((d) => d < 0).length,
    rounds: deltas.length,
  };
}

/**
 * What one scenario's CPU added over a reference costs beyond another scenario's, round by round: in round i,
 * (a_i - aReference_i) - (b_i - bReference_i), µs. For the GET-only cost: a = the gateway's unique-id GET, b = its
 * POST, each over the bare proxy's same request. `roundsCheaper`: rounds in which `a` added less than `b`.
 */
export function pairedCpuExcess(
  a: readonly RoundSample[],
  aReference: readonly RoundSample[],
  b: readonly RoundSample[],
  bReference: readonly RoundSample[],
): CpuDelta | null {
  const added = (x: RoundSample | undefined, reference: RoundSample | undefined) =>
    x?.cpuMsPerRequest != null && reference?.cpuMsPerRequest != null
      ? 1000 * (x.cpuMsPerRequest - reference.cpuMsPerRequest)
      : undefined;
  const deltas = a.flatMap((sample, i) => {
    const addedA = added(sample, aReference[i]);
    const addedB = added(b[i], bReference[i]);
    return addedA !== undefined && addedB !== undefined ? [addedA - addedB] : [];
  });
  if (deltas.length === 0) return null;
  return {
    median: round(median(deltas), 1),
    min: round(Math.min(...deltas), 1),
    max: round(Math.max(...deltas), 1),
    roundsCheaper: deltas.filter((d) => d < 0).length,
    rounds: deltas.length,
  };
}

export function pairedComparison(
  compare: readonly RoundSample[],
  gateway: readonly RoundSample[],
): PairedComparison {
  return {
    throughput: pairedRatio(compare, gateway),
    cpuUsPerRequestDelta: pairedCpuDelta(compare, gateway),
  };
}

/** `+71.0 [+60.2 to +80.3]`: a CPU difference per request with its lowest and highest round. */
export function formatCpuDelta(cpu: CpuDelta): string {
  return `${signed(cpu.median)} [${signed(cpu.min)} to ${signed(cpu.max)}]`;
}

/**
 * A paired CPU difference read against a promised ceiling (µs per request): `within` when the median round is at
 * most the ceiling, `OVER` when above; the range says whether every round agrees.
 */
export function formatAgainstCeiling(cpu: CpuDelta | null, ceilingUs: number): string {
  if (!cpu) return 'n/a';
  const verdict =
    cpu.median <= ceilingUs
      ? `within the promise (at most ${ceilingUs} µs)`
      : `OVER the promise (at most ${ceilingUs} µs)`;
  const agreement =
    cpu.max <= ceilingUs || cpu.min > ceilingUs ? 'every round agrees' : 'the rounds disagree';
  return `${formatCpuDelta(cpu)}, lower in ${cpu.roundsCheaper}/${cpu.rounds} rounds: ${verdict}; ${agreement}`;
}

export function formatRatio(r: PairedRatio | null): string {
  if (!r) return 'n/a';
  return `${r.median.toFixed(3)} [${r.min.toFixed(3)}-${r.max.toFixed(3)}]; of medians ${r.ofMedians.toFixed(3)}`;
}

/** One line per scenario: the throughput ratio and the CPU difference per request. */
export function formatComparison(scenario: string, c: PairedComparison): string {
  const cpu = c.cpuUsPerRequestDelta;
  const cpuText = cpu ? `${formatCpuDelta(cpu)}, lower in ${cpu.roundsCheaper}/${cpu.rounds} rounds` : 'n/a';
  return `  ${scenario.padEnd(20)} req/s ${formatRatio(c.throughput)}; CPU µs/req ${cpuText}`;
}

function signed(value: number): string {
  return `${value > 0 ? '+' : ''}${value.toFixed(1)}`;
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
