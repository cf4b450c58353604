import fs from 'node:fs';
import path from 'node:path';
import type { Registry } from 'prom-client';
import { compressorCounters } from '../../../../core/codec/compressor-counters';
import { CassandraPersistenceMetrics } from '../../../../persistence/cassandra/metrics';
import { KafkaPersistenceMetrics } from '../../../../persistence/kafka/metrics';
import { workerRegistry } from '../../../../workers/observability/registry';

// The Grafana dashboard (ops/grafana/kafka-flow-temporal.json) queries only metrics a worker
// serves, with labels they have: a metric renamed or a label dropped fails here, not on an
// operator's screen.
const file = path.join(__dirname, '../../../../ops/grafana/kafka-flow-temporal.json');

interface Dashboard {
  panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }>;
  templating: { list: Array<{ type: string; name: string; query?: unknown }> };
}

/** A worker's registry with both backends' metrics on it, as a worker of each registers them. */
function servedRegistry(): Registry {
  const { registry } = workerRegistry('flow', () => []);
  KafkaPersistenceMetrics.of(registry);
  CassandraPersistenceMetrics.of(registry);
  compressorCounters(registry);
  return registry;
}

/** Every series name the registry exposes (a histogram's _bucket, _sum, _count), with its label names. */
function exposed(registry: Registry): Map<string, Set<string>> {
  const names = new Map<string, Set<string>>();
  for (const m of registry.getMetricsAsArray() as unknown as Array<{ name: string; type: string; labelNames?: string[] }>) {
    const labels = new Set(m.labelNames ?? []);
    const type = m.type;
    if (type === 'histogram') {
      names.set(`${m.name}_bucket`, new Set([...labels, 'le']));
      names.set(`${m.name}_sum`, labels);
      names.set(`${m.name}_count`, labels);
    } else if (type === 'summary') {
      names.set(m.name, new Set([...labels, 'quantile']));
      names.set(`${m.name}_sum`, labels);
      names.set(`${m.name}_count`, labels);
    } else names.set(m.name, labels);
  }
  return names;
}

const PROMQL_WORDS = new Set(
  'sum min max avg count stddev stdvar topk bottomk quantile rate irate increase delta idelta deriv histogram_quantile label_values label_replace clamp_min clamp_max abs ceil floor round time vector scalar absent by without on ignoring group_left group_right bool and or unless offset le'.split(' '),
);
/** Labels Prometheus adds at scrape time. */
const SCRAPE_LABELS = ['job', 'instance'];

interface Query {
  metrics: string[];
  /** Labels matched in a metric's selector, by metric. */
  selected: Array<{ metric: string; label: string }>;
  /** Labels grouped by (by, without, on …). */
  grouped: string[];
}

/** The metric names and labels a PromQL expression uses. */
function parseQuery(expr: string): Query {
  const selected: Query['selected'] = [];
  const grouped: string[] = [];
  let rest = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  // metric{matchers}: the labels each selector matches on.
  rest = rest.replace(/([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}/g, (_all, metric: string | undefined, matchers: string) => {
    for (const m of matchers.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) selected.push({ metric: metric ?? '', label: m[1]! });
    return ` ${metric ?? ''} `;
  });
  rest = rest.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_all, _kw, labels: string) => {
    grouped.push(...labels.split(',').map((l) => l.trim()).filter(Boolean));
    return ' ';
  });
  rest = rest.replace(/\[[^\]]*\]/g, ' ').replace(/\$\{?\w+\}?/g, ' ');
  const metrics = [...rest.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((w) => !PROMQL_WORDS.has(w));
  return { metrics, selected, grouped };
}

function queriesOf(d: Dashboard): Array<{ where: string; expr: string }> {
  const out: Array<{ where: string; expr: string }> = [];
  for (const p of d.panels) for (const t of p.targets ?? []) out.push({ where: `panel "${p.title}"`, expr: t.expr });
  for (const v of d.templating.list) {
    const q = v.query as { query?: string } | string | undefined;
    const text = typeof q === 'string' ? q : q?.query;
    if (v.type === 'query' && text) out.push({ where: `variable $${v.name}`, expr: text.replace(/^label_values\((.*),\s*\w+\)$/, '$1') });
  }
  return out;
}

/** What is wrong with the dashboard's queries against the served metrics (empty: nothing). */
function problems(d: Dashboard, served: Map<string, Set<string>>): string[] {
  const found: string[] = [];
  for (const { where, expr } of queriesOf(d)) {
    const q = parseQuery(expr);
    if (q.metrics.length === 0) found.push(`${where}: no metric in ${expr}`);
    for (const m of q.metrics) if (!served.has(m)) found.push(`${where}: ${m} is not served`);
    for (const { metric, label } of q.selected) {
      if (!SCRAPE_LABELS.includes(label) && served.has(metric) && !served.get(metric)!.has(label)) found.push(`${where}: ${metric} has no label ${label}`);
    }
    const labels = new Set([...SCRAPE_LABELS, ...q.metrics.flatMap((m) => [...(served.get(m) ?? [])])]);
    for (const label of q.grouped) if (!labels.has(label)) found.push(`${where}: grouped by ${label}, which none of its metrics has`);
  }
  return found;
}

const dashboard = JSON.parse(fs.readFileSync(file, 'utf8')) as Dashboard;
const served = exposed(servedRegistry());

test('every metric the dashboard queries is served by a worker, with the labels it uses', () => {
  expect(problems(dashboard, served)).toEqual([]);
});

test('the dashboard covers fold rate, lag, commit lag, persist latency, fences, restore progress and outputs', () => {
  const queried = new Set(queriesOf(dashboard).flatMap(({ expr }) => parseQuery(expr).metrics));
  for (const m of [
    'kafka_flow_records_folded_total',
    'kafka_flow_lag_records',
    'kafka_flow_commit_lag_records',
    'kafka_flow_persist_duration_seconds_bucket',
    'kafka_flow_snapshot_fences_total',
    'kafka_flow_cassandra_fence_refusals_total',
    'kafka_flow_partitions',
    'kafka_flow_snapshot_recovered_keys_total',
    'kafka_flow_outputs_total',
  ]) {
    expect(queried).toContain(m);
  }
  expect(dashboard.panels.filter((p) => p.type !== 'row').every((p) => (p.targets ?? []).length > 0)).toBe(true);
});

test('the check finds an unknown metric, a label a metric lacks and a grouping by a missing label', () => {
  const broken: Dashboard = {
    templating: { list: [] },
    panels: [
      { type: 'timeseries', title: 'renamed', targets: [{ expr: 'sum by (flow) (rate(kafka_flow_records_fold_total{flow=~"$flow"}[$__rate_interval]))' }] },
      { type: 'timeseries', title: 'label', targets: [{ expr: 'kafka_flow_keys_live{key="x"}' }] },
      { type: 'timeseries', title: 'grouping', targets: [{ expr: 'sum by (output_topic) (kafka_flow_keys_live)' }] },
    ],
  };
  expect(problems(broken, served)).toEqual([
    'panel "renamed": kafka_flow_records_fold_total is not served',
    'panel "renamed": grouped by flow, which none of its metrics has',
    'panel "label": kafka_flow_keys_live has no label key',
    'panel "grouping": grouped by output_topic, which none of its metrics has',
  ]);
  expect(parseQuery('histogram_quantile(0.99, sum by (le, flow) (rate(x_bucket{flow=~"a|b", state="r"}[5m])))')).toEqual({
    metrics: ['x_bucket'],
    selected: [
      { metric: 'x_bucket', label: 'flow' },
      { metric: 'x_bucket', label: 'state' },
    ],
    grouped: ['le', 'flow'],
  });
});
