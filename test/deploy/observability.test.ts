// The Grafana dashboard and the Prometheus alert rules of deploy/ (issue 21): every query parses with promtool, the
// rules pass `promtool check rules` and their `promtool test rules` unit tests, the PrometheusRule copies the rules.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import {
  allPanels,
  type DashboardQuery,
  dashboardQueries,
  PROMETHEUS_RULE_FILE,
  promtool,
  ROOT,
  RULES_FILE,
  RULES_TEST_FILE,
  readDashboard,
  readRuleGroups,
  toPromql,
} from '../support/observability-files';
import { tempDir } from '../support/temp-dir';

/** A rules file with one recording rule per query, which `promtool check rules` parses like any rule. */
function checkQueries(queries: DashboardQuery[]): { ok: boolean; output: string } {
  const rules = queries.map((query, i) => ({ record: `dashboard:query_${i}`, expr: query.promql }));
  const file = join(tempDir('bff-dashboard-rules-'), 'dashboard.rules.yml');
  writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules }] }));
  return promtool(['check', 'rules', file]);
}

describe('promtool', () => {
  test('is installed (apt-get install -y prometheus)', () => {
    expect(promtool(['--version']).output).toMatch(/promtool, version/);
  });
});

describe('the Grafana dashboard', () => {
  const dashboard = readDashboard();
  const queries = dashboardQueries(dashboard);
  const panels = allPanels(dashboard).filter((p) => p.type !== 'row');
  /** Grafana's reference to the data source picked in the `datasource` variable. */
  const chosenDatasource = `\${datasource}`;

  test('has a query for every topic of the issue', () => {
    const titles = panels.map((p) => p.title.toLowerCase()).join('\n');
    for (const topic of [
      'by route',
      'by client',
      '5xx',
      'latency',
      'token calls by kind and result',
      'token source',
      'time left on the access token',
      'login back-off',
      'circuit',
      'rate-limit rejections',
      'redis',
      'upstream latency',
    ])
      expect(titles).toContain(topic);
  });

  test('every panel query and variable query parses with promtool check rules', () => {
    expect(queries.length).toBeGreaterThan(30);
    const result = checkQueries(queries);
    if (!result.ok) {
      const lines = queries.map((q, i) => `dashboard:query_${i} = ${q.where}`).join('\n');
      throw new Error(`promtool rejected a dashboard query:\n${result.output}\n${lines}`);
    }
    expect(result.output).toContain(`SUCCESS: ${queries.length} rules found`);
  });

  test('the check rejects a broken query (it would not pass a typo)', () => {
    const broken = checkQueries([
      { where: 'broken', raw: '', promql: 'sum(rate(http_requests_total{job=~".*"}[5m])' },
    ]);
    expect(broken.ok).toBe(false);
    expect(() => toPromql('rate(x{job=~"$jobb"}[5m])', new Set(['job']))).toThrow(/unknown Grafana variable/);
  });

  test('every panel reads the data source variable and has a unique id and a place of its own', () => {
    const ids = allPanels(dashboard).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const datasource = dashboard.templating.list.find((v) => v.type === 'datasource');
    expect(datasource?.name).toBe('datasource');
    for (const panel of panels) {
      expect({ [panel.title]: (panel.targets?.length ?? 0) > 0 }).toEqual({ [panel.title]: true });
      expect(panel.datasource?.uid).toBe(chosenDatasource);
      for (const target of panel.targets ?? []) expect(target.datasource?.uid).toBe(chosenDatasource);
      expect(panel.gridPos.x + panel.gridPos.w).toBeLessThanOrEqual(24);
    }
    const overlaps = (a: (typeof panels)[number]['gridPos'], b: (typeof panels)[number]['gridPos']) =>
      a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
    for (const [i, a] of allPanels(dashboard).entries())
      for (const b of allPanels(dashboard).slice(i + 1))
        expect({ [`${a.title} / ${b.title}`]: overlaps(a.gridPos, b.gridPos) }).toEqual({
          [`${a.title} / ${b.title}`]: false,
        });
  });
});

describe('the Prometheus alert rules', () => {
  const groups = readRuleGroups();
  const alerts = groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);

  test('pass promtool check rules', () => {
    const result = promtool(['check', 'rules', RULES_FILE]);
    expect(result.output).toMatch(/SUCCESS: \d+ rules found/);
    expect(result.ok).toBe(true);
  });

  test('cover every alert the issue asks for, each with a severity, a summary and a description', () => {
    expect(alerts.map((a) => a.alert).sort()).toEqual([
      'PaymentsBffAccountsReloadFailing',
      'PaymentsBffBudgetPausedLong',
      'PaymentsBffBudgetShedding',
      'PaymentsBffCatalogueReloadFailing',
      'PaymentsBffCircuitOpen',
      'PaymentsBffClientRegistryReloadFailing',
      'PaymentsBffErrorBudgetBurnFast',
      'PaymentsBffErrorBudgetBurnSlow',
      'PaymentsBffLatencyBudgetBurnFast',
      'PaymentsBffLatencyBudgetBurnSlow',
      'PaymentsBffLoginBackoffActive',
      'PaymentsBffQuotaCounterLost',
      'PaymentsBffQuotaExhausted',
      'PaymentsBffQuotaNearlyUsed',
      'PaymentsBffRedisDown',
      'PaymentsBffTokenRefreshFailing',
      'PaymentsBffUpstreamRefusesCredentials',
      'PaymentsBffUpstreamRefusesIp',
      'PaymentsBffUsageLedgerGap',
      'PaymentsBffUsageLedgerNotWritten',
      'PaymentsBffUsageStoreReset',
    ]);
    for (const alert of alerts) {
      expect({ [alert.alert as string]: alert.labels?.severity }).toEqual({
        [alert.alert as string]: expect.stringMatching(/^(page|ticket|warning)$/),
      });
      expect(alert.annotations?.summary).toEqual(expect.any(String));
      expect(alert.annotations?.description).toEqual(expect.any(String));
    }
  });

  test('every alert has a promtool unit test that fires it and one that does not', () => {
    const suite = parse(readFileSync(RULES_TEST_FILE, 'utf8')) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
    };
    const cases = suite.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const { alert } of alerts) {
      const mine = cases.filter((c) => c.alertname === alert);
      const fires = mine.some((c) => (c.exp_alerts ?? []).length > 0);
      const silent = mine.some((c) => (c.exp_alerts ?? []).length === 0);
      expect({ alert, fires, silent }).toEqual({ alert, fires: true, silent: true });
    }
  });

  test('pass their promtool unit tests (deploy/prometheus/*.test.yml)', () => {
    const dir = join(ROOT, 'deploy', 'prometheus');
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.test.yml'))
      .map((f) => join(dir, f));
    expect(files).toContain(RULES_TEST_FILE);
    const result = promtool(['test', 'rules', ...files]);
    if (!result.ok) throw new Error(`promtool test rules failed:\n${result.output}`);
    expect(result.output).toContain('SUCCESS');
  });
});

describe('the PrometheusRule for the Prometheus Operator', () => {
  const [rule, ...more] = parseAllDocuments(readFileSync(PROMETHEUS_RULE_FILE, 'utf8')).map((d) => d.toJS());

  test('holds exactly the groups of deploy/prometheus/payments-bff-rules.yml', () => {
    expect(more).toEqual([]);
    expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(rule.kind).toBe('PrometheusRule');
    expect(rule.metadata.labels['app.kubernetes.io/name']).toBe('payments-bff');
    const copy = `${relative(ROOT, PROMETHEUS_RULE_FILE)} differs from ${relative(ROOT, RULES_FILE)}: copy the rules file's groups into its spec.groups`;
    expect({ [copy]: rule.spec.groups }).toEqual({ [copy]: readRuleGroups() });
  });

  test('stays out of every kustomization, so that the base applies on a cluster without the CRD', () => {
    const k8s = join(ROOT, 'deploy', 'k8s');
    const kustomizations = readdirSync(k8s, { recursive: true, encoding: 'utf8' }).filter((f) =>
      f.endsWith('kustomization.yaml'),
    );
    expect(kustomizations.length).toBeGreaterThan(0);
    for (const file of kustomizations)
      expect(readFileSync(join(k8s, file), 'utf8')).not.toMatch(/prometheus-rule|PrometheusRule/);
  });
});
