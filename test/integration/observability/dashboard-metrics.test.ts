// Every metric the Grafana dashboard and the alert rules read is exported by a running gateway (issue 21): a
// renamed metric or label would leave a panel empty and an alert silent, and nothing else would notice.
import { loadConfig } from '../../../src/config/load-config';
import { type RunningGateway, startGateway } from '../../../src/gateway';
import { type RunningSimulator, startSimulator } from '../../../src/simulator/simulator';
import {
  dashboardQueries,
  labelsRead,
  metricNames,
  readDashboard,
  readRuleGroups,
} from '../../support/observability-files';
import {
  API_KEY,
  captureLogs,
  gatewayEnv,
  LIMITED_KEY,
  PASSWORD,
  PLAN_ID,
  USERNAME,
} from '../../support/ops-fixture';

/** Labels Prometheus adds to every scraped series. */
const TARGET_LABELS = ['job', 'instance'];

/** The series names of the Prometheus text format: histograms and summaries as their _bucket/_sum/_count series. */
function exportedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name as string);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

/** The label names each metric's samples carry in the Prometheus text format. */
function exportedLabels(text: string): Map<string, Set<string>> {
  const labels = new Map<string, Set<string>>();
  for (const [, name, list] of text.matchAll(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$/gm)) {
    const names = labels.get(name as string) ?? new Set<string>();
    for (const [, label] of (list ?? '').matchAll(/(\w+)="/g)) names.add(label as string);
    labels.set(name as string, names);
  }
  return labels;
}

function allQueries(): { where: string; promql: string }[] {
  return [
    ...dashboardQueries(readDashboard()).map((q) => ({ where: `dashboard ${q.where}`, promql: q.promql })),
    ...readRuleGroups()
      .flatMap((g) => g.rules)
      .map((r) => ({ where: `rule ${r.alert ?? r.record}`, promql: r.expr })),
  ];
}

function referencedNames(): Map<string, string[]> {
  const groups = readRuleGroups();
  const recorded = new Set(groups.flatMap((g) => g.rules.flatMap((r) => (r.record ? [r.record] : []))));
  const users = new Map<string, string[]>();
  const use = (name: string, where: string) => users.set(name, [...(users.get(name) ?? []), where]);
  for (const query of dashboardQueries(readDashboard()))
    for (const name of metricNames(query.promql)) use(name, `dashboard ${query.where}`);
  for (const rule of groups.flatMap((g) => g.rules))
    for (const name of metricNames(rule.expr))
      if (!recorded.has(name)) use(name, `rule ${rule.alert ?? rule.record}`);
  return users;
}

describe('the metrics of the dashboard and the alert rules', () => {
  let simulator: RunningSimulator;
  let gateway: RunningGateway;
  let text: string;

  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, username: USERNAME, password: PASSWORD });
    const config = loadConfig(gatewayEnv(simulator.url));
    gateway = await startGateway(config, { logStream: captureLogs().stream });
    const plan = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
      headers: { 'x-api-key': API_KEY },
    });
    expect(plan.status).toBe(200);
    expect((await fetch(`${gateway.url}/no-such-route`)).status).toBe(404);
    const limited: number[] = [];
    for (let i = 0; i < 3; i++) {
      const answer = await fetch(`${gateway.url}/api/subscriptions/plan/${PLAN_ID}`, {
        headers: { 'x-api-key': LIMITED_KEY },
      });
      limited.push(answer.status);
    }
    expect(limited).toEqual([200, 200, 429]);
    text = await (await fetch(`${gateway.url}/metrics`)).text();
  });

  afterAll(async () => {
    await gateway?.shutdown();
    await simulator?.close();
  });

  test('are all exported by a running gateway', () => {
    const exported = exportedNames(text);
    const missing = [...referencedNames()]
      .filter(([name]) => !exported.has(name))
      .map(([name, where]) => `${name} (${where.join('; ')})`);
    expect(missing).toEqual([]);
  });

  test('every label they filter or group a metric by is on its exported series', () => {
    const exported = exportedLabels(text);
    const wrong: string[] = [];
    for (const { where, promql } of allQueries())
      for (const [metric, labels] of labelsRead(promql)) {
        const carried = exported.get(metric);
        // Labelled metrics without a sample yet (no store error in this run) cannot be checked.
        if (!carried) continue;
        const known = new Set([...carried, ...TARGET_LABELS]);
        for (const label of labels)
          if (!known.has(label)) wrong.push(`${metric} has no label ${label} (${where})`);
      }
    expect(wrong).toEqual([]);
  });

  test('the time left on the access token is exported after a forwarded call', () => {
    const match = /^upstream_access_token_remaining_seconds\{account="default"\} (\S+)$/m.exec(text);
    const seconds = Number(match?.[1]);
    // The simulator's access tokens live 5 minutes, as the provider's do.
    expect(seconds).toBeGreaterThan(200);
    expect(seconds).toBeLessThanOrEqual(300);
  });
});
