// One account's view of the gateway metrics: the same objects the token and forwarding modules already use, with the
// label `account` added to every observation, so those modules need not know that there are several accounts.
import type { Metrics } from '../observability/metrics';

type Labels = Record<string, string | number>;

/** What a prom-client metric offers that the account's modules call. */
interface LabelledMetric {
  inc?(...args: unknown[]): void;
  observe?(...args: unknown[]): void;
  set?(...args: unknown[]): void;
  labels?(...args: unknown[]): unknown;
}

/**
 * `metric` with `account` added to the labels of each call. The view inherits everything else from the metric
 * (Object.create), so it keeps the metric's type. Positional `labels('memory')` are named from `labelNames` (the
 * metric's own order, `account` last). Costs one small object per observation.
 */
function withAccount<T extends object>(metric: T, account: string, labelNames: readonly string[]): T {
  const base = metric as T & LabelledMetric;
  const view = Object.create(base) as T & LabelledMetric;
  const labelled = (labels: unknown): Labels =>
    typeof labels === 'object' && labels !== null ? { ...(labels as Labels), account } : { account };
  const valued = (first: unknown, second: unknown): [Labels, unknown] =>
    typeof first === 'object' && first !== null ? [labelled(first), second] : [{ account }, first];
  if (base.inc) view.inc = (first?: unknown, second?: unknown) => base.inc?.(...valued(first, second));
  if (base.observe)
    view.observe = (first?: unknown, second?: unknown) => base.observe?.(...valued(first, second));
  if (base.set) view.set = (first?: unknown, second?: unknown) => base.set?.(...valued(first, second));
  if (base.labels)
    view.labels = (...values: unknown[]) => {
      if (typeof values[0] === 'object' && values[0] !== null) return base.labels?.(labelled(values[0]));
      const named: Labels = { account };
      values.forEach((value, index) => {
        const name = labelNames[index];
        if (name !== undefined) named[name] = value as string;
      });
      return base.labels?.(named);
    };
  return view;
}

/**
 * The upstream latency histogram, observed once per forwarded call: its labels are built in one fixed shape (no
 * spread, no wrapper per call), which prom-client then hashes as fast as the metric's own.
 */
function upstreamDurationWithAccount(metric: Metrics['upstreamDuration'], account: string) {
  const view = withAccount(metric, account, ['route', 'status']);
  const generic = view.observe;
  view.observe = (labels: unknown, value?: unknown) => {
    if (typeof labels !== 'object' || labels === null) return generic.call(view, labels as never);
    const { route, status } = labels as { route: string; status: string };
    metric.observe({ route, status, account }, value as number);
  };
  return view;
}

export interface AccountMetrics {
  /** The metrics object to hand the account's token manager and forwarder. */
  readonly metrics: Metrics;
  /** Drops the account's scrape-time readings (pool, back-off): a removed account stops reporting. */
  close(): void;
  /**
   * Whether no later view of the same account id exists: a changed account's new unit is built before the old one
   * closes, and the old one must not remove the series the new one exports.
   */
  isNewest(): boolean;
}

/** The newest view of each account id, per metrics registry. */
const newestViews = new WeakMap<object, Map<string, object>>();

/** The metrics of one account: every per-account metric labelled `account`, shared ones (Redis, HTTP) unchanged. */
export function accountMetrics(metrics: Metrics, account: string): AccountMetrics {
  const stops: (() => void)[] = [];
  const view: Metrics = {
    ...metrics,
    upstreamDuration: upstreamDurationWithAccount(metrics.upstreamDuration, account),
    tokenRequests: withAccount(metrics.tokenRequests, account, ['kind', 'result']),
    tokenSource: withAccount(metrics.tokenSource, account, ['source']),
    circuitState: withAccount(metrics.circuitState, account, ['operation']),
    tokenBackoff: {
      ...metrics.tokenBackoff,
      readFrom: (reader) => stops.push(metrics.tokenBackoff.readFromAccount(account, reader)),
    },
    watchUpstreamPool: (_name, reading) => {
      const stop = metrics.watchUpstreamPool(account, reading);
      stops.push(stop);
      return stop;
    },
  };
  metrics.zeroTokenRequests(account);
  let newest = newestViews.get(metrics.registry);
  if (!newest) {
    newest = new Map();
    newestViews.set(metrics.registry, newest);
  }
  const views = newest;
  views.set(account, view);
  return {
    metrics: view,
    close() {
      for (const stop of stops.splice(0)) stop();
      if (views.get(account) === view) views.delete(account);
    },
    isNewest: () => views.get(account) === view,
  };
}
