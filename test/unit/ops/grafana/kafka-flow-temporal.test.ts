import fs from 'node:fs';
import path from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
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

/** Labels Prometheus adds at scrape time. */
const SCRAPE_LABELS = ['job', 'instance'];

interface Query {
  metrics: string[];
  /** Labels matched in a metric's selector, by metric. */
  selected: Array<{ metric: string; label: string }>;
  /** Labels grouped by (by, without, on …). */
  grouped: string[];
  /** Where the expression is not PromQL (Prometheus's own grammar: @prometheus-io/lezer-promql). */
  errors: number[];
}

/**
 * The metric names and labels a PromQL expression uses, parsed with Prometheus's grammar. Grafana's
 * interval variables ($__rate_interval …) are not PromQL: they stand for a duration, so one is put
 * in their place; variables inside label values are plain strings to the parser.
 */
function parseQuery(expr: string): Query {
  const text = expr.replace(/\$\{?__\w+\}?/g, '5m');
  const query: Query = { metrics: [], selected: [], grouped: [], errors: [] };
  let metric = '';
  parser.parse(text).iterate({
    enter(node) {
      const value = text.slice(node.from, node.to);
      if (node.type.isError) query.errors.push(node.from);
      else if (node.name === 'VectorSelector') metric = '';
      else if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector') {
        metric = value;
        query.metrics.push(value);
      } else if (node.name === 'LabelName') {
        const parent = node.node.parent?.name;
        if (parent === 'GroupingLabels') query.grouped.push(value);
        else if (parent === 'UnquotedLabelMatcher') query.selected.push({ metric, label: value });
      }
    },
  });
  return query;
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
    if (q.errors.length > 0) found.push(`${where}: not PromQL: ${expr}`);
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
      { type: 'timeseries', title: 'syntax', targets: [{ expr: 'sum(rate(kafka_flow_records_folded_total[$__rate_interval])' }] },
    ],
  };
  expect(problems(broken, served)).toEqual([
    'panel "renamed": kafka_flow_records_fold_total is not served',
    'panel "renamed": grouped by flow, which none of its metrics has',
    'panel "label": kafka_flow_keys_live has no label key',
    'panel "grouping": grouped by output_topic, which none of its metrics has',
    'panel "syntax": not PromQL: sum(rate(kafka_flow_records_folded_total[$__rate_interval])',
  ]);
  expect(parseQuery('histogram_quantile(0.99, sum by (le, flow) (rate(x_bucket{flow=~"a|b", state="r"}[5m])))')).toEqual({
    metrics: ['x_bucket'],
    selected: [
      { metric: 'x_bucket', label: 'flow' },
      { metric: 'x_bucket', label: 'state' },
    ],
    grouped: ['le', 'flow'],
    errors: [],
  });
});
