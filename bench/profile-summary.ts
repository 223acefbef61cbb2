// Summarizes a V8 .cpuprofile (node --cpu-prof): the functions and the packages with the most self time.
//   node dist/bench/profile-summary.js <file.cpuprofile> [topN]
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
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
}

export function summarizeProfile(file: string, top = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const functions = new Map<string, number>();
  const packages = new Map<string, number>();
  let total = 0;
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
  }
  const entries = (map: Map<string, number>) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, selfMs: us / 1000, percent: (100 * us) / total }));
  return { totalMs: total / 1000, functions: entries(functions), packages: entries(packages) };
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
  return lines.join('\n');
}

if (require.main === module) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node dist/bench/profile-summary.js <file.cpuprofile> [topN]\n');
    process.exit(2);
  }
  process.stdout.write(`${formatProfile(summarizeProfile(file, Number(top ?? 15)))}\n`);
}
