// A worker's own /metrics, read by the integration tests: the sum of a metric's series, parsed by
// the benchmarks' Prometheus text reader (bench/lib/prometheus.ts).
import { parseMetrics, sumOf } from '../../bench/lib/prometheus';

/** The sum of `name`'s series on the worker's /metrics at `port` whose labels include every one of `labels`. */
export async function workerMetric(port: number, name: string, labels: Record<string, string> = {}): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (!res.ok) throw new Error(`GET http://127.0.0.1:${port}/metrics answered ${res.status}`);
  return sumOf(parseMetrics(await res.text(), new Set([name])), name, labels);
}
