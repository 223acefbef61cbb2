// Reads the Grafana dashboard and the Prometheus rules of deploy/, turns dashboard queries into plain PromQL and
// lists the metric names a PromQL expression reads; promtool runs with a clear message when it is missing.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

export const ROOT = join(__dirname, '..', '..');
export const DASHBOARD_FILE = join(ROOT, 'deploy', 'grafana', 'payments-bff-dashboard.json');
export const RULES_FILE = join(ROOT, 'deploy', 'prometheus', 'payments-bff-rules.yml');
export const RULES_TEST_FILE = join(ROOT, 'deploy', 'prometheus', 'payments-bff-rules.test.yml');
export const PROMETHEUS_RULE_FILE = join(ROOT, 'deploy', 'k8s', 'extras', 'prometheus-rule.yaml');

export interface Rule {
  readonly record?: string;
  readonly alert?: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

export interface RuleGroup {
  readonly name: string;
  readonly interval?: string;
  readonly rules: Rule[];
}

export interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly gridPos: { h: number; w: number; x: number; y: number };
  readonly datasource?: { type: string; uid: string };
  readonly targets?: { refId: string; expr: string; datasource?: { type: string; uid: string } }[];
  readonly panels?: Panel[];
}

export interface Dashboard {
  readonly uid: string;
  readonly title: string;
  readonly panels: Panel[];
  readonly templating: {
    list: { name: string; type: string; query: string | { query: string }; datasource?: { uid: string } }[];
  };
}

export interface DashboardQuery {
  /** Where it is: the panel title and target, or the template variable. */
  readonly where: string;
  /** As written in the dashboard (Grafana variables included). */
  readonly raw: string;
  /** Plain PromQL: variables replaced by values Prometheus accepts. */
  readonly promql: string;
}

export function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;
}

export function readRuleGroups(file = RULES_FILE): RuleGroup[] {
  return (parse(readFileSync(file, 'utf8')) as { groups: RuleGroup[] }).groups;
}

export function allPanels(dashboard: Dashboard): Panel[] {
  return dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]);
}

/** Grafana's own interval variables, replaced by a duration Prometheus accepts. */
const BUILT_IN_DURATIONS: Record<string, string> = {
  __rate_interval: '5m',
  __interval: '1m',
  __range: '1h',
};

/**
 * Replaces `$name`, `${name}` and `[[name]]` by a regex matching everything (the dashboard's variables are used in
 * `=~` matchers only) and Grafana's interval variables by a duration; an unknown variable is an error.
 */
export function toPromql(expr: string, variables: ReadonlySet<string>): string {
  return expr.replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]/g, (match, a, b, c) => {
    const name = (a ?? b ?? c) as string;
    const duration = BUILT_IN_DURATIONS[name];
    if (duration) return duration;
    if (variables.has(name)) return '.*';
    throw new Error(`unknown Grafana variable ${match} in: ${expr}`);
  });
}

/** Every PromQL query of the dashboard: panel targets and the selectors of `label_values(...)` variables. */
export function dashboardQueries(dashboard: Dashboard): DashboardQuery[] {
  const variables = new Set(dashboard.templating.list.map((v) => v.name));
  const queries: DashboardQuery[] = [];
  for (const panel of allPanels(dashboard))
    for (const target of panel.targets ?? [])
      queries.push({
        where: `panel "${panel.title}" target ${target.refId}`,
        raw: target.expr,
        promql: toPromql(target.expr, variables),
      });
  for (const variable of dashboard.templating.list) {
    if (variable.type !== 'query') continue;
    const query = typeof variable.query === 'string' ? variable.query : variable.query.query;
    const match = /^label_values\((.+),\s*(\w+)\)$/.exec(query);
    if (!match)
      throw new Error(`variable ${variable.name}: expected label_values(selector, label), got ${query}`);
    queries.push({ where: `variable ${variable.name}`, raw: query, promql: toPromql(match[1]!, variables) });
  }
  return queries;
}

const NOT_METRICS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'inf',
  'nan',
]);

/** The metric names an expression reads (strings, matchers, ranges, grouping lists and function names removed). */
export function metricNames(promql: string): string[] {
  const bare = promql
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w.:])[a-zA-Z_:][\w:]*(?![\w:]|\s*\()/g))
    if (!NOT_METRICS.has(match[0].toLowerCase())) names.add(match[0]);
  return [...names].sort();
}

/** Runs promtool; when it is not installed, fails with the command that installs it. */
export function promtool(args: string[]): { ok: boolean; output: string } {
  try {
    const output = execFileSync('promtool', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return { ok: true, output };
  } catch (error) {
    const failure = error as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (failure.code === 'ENOENT')
      throw new Error(
        '`promtool` is not on the PATH. The dashboard and alert-rule tests run it; install it with ' +
          '`apt-get install -y prometheus` (Debian: provides /usr/bin/promtool; stop the prometheus service it may ' +
          'start) or take promtool from a Prometheus release tarball.',
      );
    return { ok: false, output: `${failure.stdout ?? ''}${failure.stderr ?? failure.message}` };
  }
}

/** The label names an expression reads, per metric: matchers of each selector, and grouping lists when one metric is read. */
export function labelsRead(promql: string): Map<string, Set<string>> {
  const read = new Map<string, Set<string>>();
  const add = (metric: string, label: string) => read.set(metric, (read.get(metric) ?? new Set()).add(label));
  for (const [, metric, matchers] of promql.matchAll(/([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}/g))
    for (const [, label] of (matchers as string).matchAll(/(\w+)\s*(?:=~|!~|!=|=)\s*"/g))
      add(metric as string, label as string);
  const metrics = metricNames(promql);
  if (metrics.length === 1)
    for (const [, list] of promql.matchAll(/\b(?:by|without|on|ignoring)\s*\(([^)]*)\)/g))
      for (const label of (list as string).split(',').map((l) => l.trim()))
        if (label) add(metrics[0] as string, label);
  return read;
}
